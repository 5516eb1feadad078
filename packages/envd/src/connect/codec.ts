import {
  create,
  fromBinary,
  fromJsonString,
  toBinary,
  toJsonString,
  type DescMessage,
  type MessageInitShape,
  type MessageShape,
} from '@bufbuild/protobuf';
import { ConnectError } from './code.ts';

/** The two Connect codecs: protobuf binary ("proto") and the canonical JSON mapping ("json"). */
export interface Codec {
  readonly name: 'proto' | 'json';
  parse<S extends DescMessage>(schema: S, data: Uint8Array): MessageShape<S>;
  serialize<S extends DescMessage>(schema: S, message: MessageInitShape<S>): Uint8Array;
}

const textDecoder = new TextDecoder('utf-8', { fatal: true });
const textEncoder = new TextEncoder();

export const protoCodec: Codec = {
  name: 'proto',
  parse(schema, data) {
    try {
      return fromBinary(schema, data);
    } catch (err) {
      throw new ConnectError('invalid_argument', `cannot decode ${schema.typeName} from protobuf: ${(err as Error).message}`);
    }
  },
  serialize(schema, message) {
    return toBinary(schema, create(schema, message));
  },
};

export const jsonCodec: Codec = {
  name: 'json',
  parse(schema, data) {
    try {
      const text = data.length === 0 ? '{}' : textDecoder.decode(data);
      return fromJsonString(schema, text, { ignoreUnknownFields: true });
    } catch (err) {
      throw new ConnectError('invalid_argument', `cannot decode ${schema.typeName} from JSON: ${(err as Error).message}`);
    }
  },
  serialize(schema, message) {
    return textEncoder.encode(toJsonString(schema, create(schema, message)));
  },
};
