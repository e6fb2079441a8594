import { connect, createServer } from 'node:net';
import type { AddressInfo, Server, Socket } from 'node:net';

/**
 * A database endpoint that moves, as managed PostgreSQL's does on a failover: a TCP proxy whose
 * target can be switched. Switching cuts every open connection, so the apps' pools reconnect to
 * the new primary (node-postgres has no multi-host failover of its own).
 */
export class MovingEndpoint {
  private readonly sockets = new Set<Socket>();

  private constructor(
    private readonly server: Server,
    private targetPort: number,
  ) {
    server.on('connection', (client) => this.accept(client));
  }

  /** Starts the endpoint on a free port of 127.0.0.1, pointing at `targetPort`. */
  static async start(targetPort: number): Promise<MovingEndpoint> {
    const endpoint = new MovingEndpoint(createServer(), targetPort);
    await new Promise<void>((resolve) => endpoint.server.listen(0, '127.0.0.1', resolve));
    return endpoint;
  }

  get port(): number {
    return (this.server.address() as AddressInfo).port;
  }

  /** Points new connections at `port` and cuts the open ones. */
  moveTo(port: number): void {
    this.targetPort = port;
    for (const socket of this.sockets) socket.destroy();
    this.sockets.clear();
  }

  async close(): Promise<void> {
    this.moveTo(this.targetPort);
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private accept(client: Socket): void {
    const upstream = connect(this.targetPort, '127.0.0.1');
    for (const socket of [client, upstream]) {
      this.sockets.add(socket);
      socket.on('error', () => undefined);
      socket.on('close', () => {
        this.sockets.delete(socket);
        client.destroy();
        upstream.destroy();
      });
    }
    client.pipe(upstream);
    upstream.pipe(client);
  }
}
