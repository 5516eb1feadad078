/**
 * A Jupyter client of one kernel over its connection file's ports: shell and control as DEALER
 * sockets, iopub as SUB. A request's replies and broadcasts are routed to it by
 * parent_header.msg_id; everything else is dropped.
 */
import { randomUUID } from 'node:crypto';
import { waitAtMost } from '@svc/common/deadline';
import { ZmtpSocket } from './zmtp.ts';
import { deserialize, isWireError, newMessage, serialize, type JupyterMessage } from './jupyter-wire.ts';
import type { Log } from './kernel.ts';

export interface ConnectionInfo {
  ip: string;
  transport: 'tcp';
  shell_port: number;
  iopub_port: number;
  stdin_port: number;
  control_port: number;
  hb_port: number;
  key: string;
  signature_scheme: 'hmac-sha256';
  kernel_name: string;
}

type Channel = 'shell' | 'control';

interface Pending {
  onBroadcast: (message: JupyterMessage) => void;
  onReply: (message: JupyterMessage) => void;
}

export class JupyterClient {
  private readonly pending = new Map<string, Pending>();
  private readonly key: Buffer;
  private readonly session = randomUUID();
  private closed = false;
  /** Called once when a socket closes that we did not close: the kernel is gone. */
  onLost: (reason: Error) => void = () => {};

  private constructor(
    private readonly sockets: Record<Channel | 'iopub', ZmtpSocket>,
    info: ConnectionInfo,
    private readonly log: Log,
  ) {
    this.key = Buffer.from(info.key, 'utf8');
    for (const [name, socket] of Object.entries(sockets)) {
      socket.on('message', (parts) => this.receive(name, parts));
      socket.on('close', (err) => {
        if (err && !this.closed) {
          this.close();
          this.onLost(err);
        }
      });
    }
  }

  /** Connects to a kernel that may still be starting: refused connections are retried until `deadline`. */
  static async connect(info: ConnectionInfo, log: Log, deadline: number, isAlive: () => boolean, maxMessageBytes?: number): Promise<JupyterClient> {
    const open = async (port: number, type: 'DEALER' | 'SUB') => {
      for (;;) {
        try {
          return await ZmtpSocket.connect(info.ip, port, type, { maxMessageBytes });
        } catch (err) {
          if (!isAlive()) throw new Error('the kernel process ended while starting');
          if (Date.now() > deadline) throw err;
          await new Promise((r) => setTimeout(r, 50));
        }
      }
    };
    const [shell, control, iopub] = await Promise.all([open(info.shell_port, 'DEALER'), open(info.control_port, 'DEALER'), open(info.iopub_port, 'SUB')]);
    return new JupyterClient({ shell, control, iopub }, info, log);
  }

  /**
   * Sends a request; its broadcasts on iopub go to `onBroadcast` until `done` is called, and the
   * promise is its reply on the same channel.
   */
  request(channel: Channel, msgType: string, content: Record<string, unknown>, onBroadcast: (m: JupyterMessage) => void = () => {}): { msgId: string; reply: Promise<JupyterMessage>; done: () => void } {
    const message = newMessage(msgType, content, this.session);
    const msgId = message.header.msg_id;
    const reply = new Promise<JupyterMessage>((resolve) => {
      this.pending.set(msgId, { onBroadcast, onReply: resolve });
    });
    this.sockets[channel].send(serialize(message, this.key));
    return { msgId, reply, done: () => this.pending.delete(msgId) };
  }

  /** Waits until iopub carries our messages: a SUB socket misses what is published before its subscription lands. */
  async waitForIopub(deadline: number): Promise<void> {
    for (;;) {
      let heard = false;
      const r = this.request('shell', 'kernel_info_request', {}, () => { heard = true; });
      await waitAtMost(r.reply, 2_000);
      // The status broadcasts of the request come around its reply; give the last a moment.
      for (let i = 0; i < 10 && !heard; i++) await new Promise((res) => setTimeout(res, 20));
      r.done();
      if (heard) return;
      if (this.closed) throw new Error('the kernel connection closed while starting');
      if (Date.now() > deadline) throw new Error('the kernel never answered on iopub');
    }
  }

  /**
   * Stops or goes on reading the kernel's broadcasts (its output), for a client that reads slower
   * than the kernel writes. Replies (shell, control) keep coming. Each kernel has its own sockets,
   * so this holds back no other context.
   */
  pauseBroadcasts(): void {
    this.sockets.iopub.pause();
  }

  resumeBroadcasts(): void {
    this.sockets.iopub.resume();
  }

  close(): void {
    this.closed = true;
    for (const s of Object.values(this.sockets)) s.close();
  }

  private receive(channel: string, parts: Buffer[]): void {
    const message = deserialize(parts, this.key);
    if (isWireError(message)) {
      this.log('warn', `jupyter: dropped a ${channel} message: ${message.message}`, { code: message.code });
      return;
    }
    const parent = message.parent_header?.msg_id;
    const pending = parent ? this.pending.get(parent) : undefined;
    if (!pending) return;
    if (channel === 'iopub') pending.onBroadcast(message);
    else pending.onReply(message);
  }
}
