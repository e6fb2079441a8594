import { connect } from 'node:net';

/**
 * Whether a Redis server answers PING at `url` within `timeoutMs`. The peer's Redis client
 * retries forever when Redis is down, so the runner checks first and skips the peer instead.
 */
export function redisAnswers(url: string, timeoutMs = 2000): Promise<boolean> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve) => {
    const socket = connect({ host: hostname || '127.0.0.1', port: Number(port) || 6379 });
    const finish = (answer: boolean) => {
      socket.destroy();
      resolve(answer);
    };
    socket.setTimeout(timeoutMs, () => finish(false));
    socket.once('error', () => finish(false));
    socket.once('connect', () => socket.write('PING\r\n'));
    socket.once('data', (chunk) => finish(chunk.toString('utf8').startsWith('+PONG')));
  });
}
