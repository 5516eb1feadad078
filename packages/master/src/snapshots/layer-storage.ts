import type { Readable } from 'node:stream';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { badRequest } from '@svc/common';
import { MASTER_DOWNLOAD_ROUTES } from '@svc/contracts/master-downloads';
import { pathTo, serve } from '@svc/contracts/route-table';
import type { TemplateCenterClient } from '@svc/contracts/template-center';
import { relayFromTemplateCenter } from '../templates/index.ts';
import type { LayerStorage } from './ports.ts';

const LAYER_ID = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/;
const DOWNLOAD = MASTER_DOWNLOAD_ROUTES.layer;

/** Snapshot layers in the template center's artifact store, beside the template images. */
export class TemplateCenterLayerStorage implements LayerStorage {
  constructor(private readonly templateCenter: TemplateCenterClient, private readonly masterAddr: string) {}

  async put(layerId: string, meta: { sha256: string; sizeBytes: number }, archive: Readable): Promise<void> {
    await this.templateCenter.putLayer(layerId, meta, archive);
  }

  async delete(layerId: string): Promise<void> {
    await this.templateCenter.deleteArtifact(layerId);
  }

  downloadUrl(layerId: string): string {
    return `${this.masterAddr.replace(/\/+$/, '')}${pathTo(DOWNLOAD, { layerId })}`;
  }

  /** GET|HEAD /internal/v1/layers/:layerId: node agents download layers through the master, as template images. */
  registerDownloadRoute(app: FastifyInstance): void {
    const download = async (req: FastifyRequest<{ Params: { layerId: string } }>, reply: FastifyReply) => {
      if (!LAYER_ID.test(req.params.layerId)) throw badRequest('layer id is not valid');
      return relayFromTemplateCenter(reply, this.templateCenter, req.params.layerId, req.method === 'HEAD');
    };
    // HEAD first, the same handler: the GET would otherwise bring fastify's own HEAD, which answers content-length 0.
    app.route({ method: 'HEAD', url: DOWNLOAD.path, handler: download });
    serve(app, DOWNLOAD, download);
  }
}
