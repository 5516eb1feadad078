/**
 * The public REST API's operations as TypeScript types, computed by the compiler from the OpenAPI
 * document itself (public-api.ts, `PUBLIC_API`): which paths a method has, a path template's
 * parameters, the JSON body an operation takes and the JSON its 2xx answers carry. A client typed
 * by these (the SDK's `ApiClient.call`) cannot name a path the document lacks, nor expect an
 * answer the document does not give. Types only: nothing here exists at run time.
 *
 * What the document's type does not keep, this cannot give: the query parameters' names are
 * widened to `string` where public-api.ts builds them (its `query()` helper), so queries stay
 * loosely typed (a name is not checked).
 */
import type { FromSchema, JSONSchema } from 'json-schema-to-ts';
import type { PUBLIC_API } from './public-api.ts';

type Paths = (typeof PUBLIC_API)['paths'];
type Components = (typeof PUBLIC_API)['components']['schemas'];

export type PublicMethod = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';

/** The document's operation of `M` on `P`. */
type Operation<M extends PublicMethod, P extends keyof Paths> = Paths[P][Lowercase<M> & keyof Paths[P]];

/** The 2xx statuses; a 3xx (a redirect) is no answer a JSON client reads. */
type Success = 200 | 201 | 202 | 203 | 204 | 205 | 206;
type SuccessResponse<Op> = Op extends { readonly responses: infer R } ? R[keyof R & Success] : never;

/** A request body or response whose content is not JSON (an octet stream, HTML), else never. */
type NotJson<X> = X extends { readonly content: infer C } ? ('application/json' extends keyof C ? never : X) : never;
type IsJsonOperation<Op> = [NotJson<SuccessResponse<Op>>] extends [never]
  ? Op extends { readonly requestBody: infer B } ? [NotJson<B>] extends [never] ? true : false : true
  : false;

/**
 * The paths the document has an operation of `M` on that speaks JSON (or nothing) both ways: the
 * artifact download, the context-files upload and the docs page are bytes and HTML, not for a
 * JSON client.
 */
export type PublicJsonPath<M extends PublicMethod> = {
  [P in keyof Paths]: Lowercase<M> extends keyof Paths[P] ? IsJsonOperation<Operation<M, P>> extends true ? P : never : never;
}[keyof Paths];

/** `{sandboxID}` and the like in a path template, by name. */
type ParamNames<P extends string> = P extends `${string}{${infer Name}}${infer Rest}` ? Name | ParamNames<Rest> : never;
/** A path template's parameters: `/sandboxes/{sandboxID}` has `{ sandboxID: string }`. */
export type PublicPathParams<P extends string> = { [K in ParamNames<P>]: string };

/**
 * A schema's wire type. A `#/components/schemas/...` reference is the named schema's type (each
 * computed once, whichever operation names it); a list is its items' type, as an array (the
 * document's inline `{type: 'array', items}` loses its `type` literal, `items` says it all).
 */
type Wire<S> = S extends JSONSchema ? FromSchema<S, { keepDefaultedPropertiesOptional: true }> : unknown;
type Component<N extends keyof Components> = Wire<Components[N]>;
type SchemaType<S> = S extends { readonly $ref: `#/components/schemas/${infer N extends keyof Components & string}` } ? Component<N>
  : S extends { readonly items: infer I } ? Array<SchemaType<I>>
    : Wire<S>;

/** What a request body or response carries: its JSON schema's type; none (a 204) is undefined. */
type ContentType<X> = X extends { readonly content: { readonly 'application/json': { readonly schema: infer S } } } ? SchemaType<S> : undefined;

/**
 * A body's type without the `[x: string]: unknown` an open object (no `additionalProperties:
 * false`) gets: the sender names the fields it sends, and an interface value is assignable to it
 * (the extra fields it may carry are what an open object allows). A map (`additionalProperties`
 * with a schema) keeps its typed index signature.
 */
type Sent<T> = T extends readonly (infer U)[] ? Sent<U>[]
  : T extends object ? { [K in keyof T as string extends K ? unknown extends T[K] ? never : K : K]: Sent<T[K]> }
    : T;

/** What a 2xx answer of the operation carries (a union when its 2xx answers differ). */
export type PublicAnswer<M extends PublicMethod, P extends keyof Paths> = ContentType<SuccessResponse<Operation<M, P>>>;

/**
 * The request body the operation takes: `{ body: T }` when the document requires one, `{ body?: T }`
 * when it is optional, and for an operation without a body at most an empty object, which the
 * gateway takes as no body.
 */
export type PublicBody<M extends PublicMethod, P extends keyof Paths> = Operation<M, P> extends { readonly requestBody: infer B }
  ? B extends { readonly required: true } ? { body: Sent<ContentType<B>> } : { body?: Sent<ContentType<B>> }
  : { body?: Record<string, never> };
