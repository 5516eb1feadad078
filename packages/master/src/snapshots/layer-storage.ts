import type { Readable } from 'node:stream';
import type { FastifyInstance } from 'fastify';
import { badRequest } from '@svc/common';
import type { TemplateCenterClient } from '@svc/contracts/template-center';
import { relayFromTemplateCenter } from '../templates/index.ts';
import type { LayerStorage } from './ports.ts';

const LAYER_ID = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/;
const DOWNLOAD_PATH = '/internal/v1/layers';

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
    return `${this.masterAddr.replace(/\/+$/, '')}${DOWNLOAD_PATH}/${encodeURIComponent(layerId)}`;
  }

  /** GET|HEAD /internal/v1/layers/:layerId: node agents download layers through the master, as template images. */
  registerDownloadRoute(app: FastifyInstance): void {
    app.route<{ Params: { layerId: string } }>({
      method: ['GET', 'HEAD'], url: `${DOWNLOAD_PATH}/:layerId`, exposeHeadRoute: false,
      handler: async (req, reply) => {
        if (!LAYER_ID.test(req.params.layerId)) throw badRequest('layer id is not valid');
        return relayFromTemplateCenter(reply, this.templateCenter, req.params.layerId, req.method === 'HEAD');
      },
    });
  }
}
