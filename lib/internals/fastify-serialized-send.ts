import { fellBack, internalEnabled } from './internal-switch';

/**
 * Fastify keeps two things that decide what `reply.send(object)` writes under private symbols:
 * a serializer set on the reply itself (`reply.serializer()`) and the route's `preSerialization`
 * hooks. They are found once, by their descriptions, on the first reply that asks; when they are
 * not there (Fastify changed), or `NEST_IDEMPOTENCY_PLAIN` names this trick, `null`.
 */
let symbols: { serializer: symbol; context: symbol } | null | undefined;

function fastifySymbols(reply: any): typeof symbols {
  if (symbols !== undefined) return symbols;
  if (!internalEnabled('fastify-serialized-send')) return (symbols = null);
  const described = (target: object, description: string) =>
    Object.getOwnPropertySymbols(target).find((symbol) => symbol.description === description);
  const serializer = described(reply, 'fastify.reply.serializer');
  const context = reply.request && described(reply.request, 'fastify.context');
  symbols = serializer && context ? { serializer, context } : null;
  if (!symbols) fellBack('fastify-serialized-send', "Fastify's private symbols moved");
  return symbols;
}

/**
 * Whether `reply.send(text)`, with the JSON content type already on the reply, writes what
 * Fastify would have written for the object `text` was serialized from by `reply.serialize`:
 * true when nothing runs between Fastify's serializer and its `onSend` hooks for this reply (no
 * `preSerialization` hook on the route) and the reply has no serializer of its own (which
 * `send` would run on the text again). False on the plain path: the object is then sent and
 * serialized a second time (docs/design/internals.md).
 */
export function sendsSerializedText(reply: any): boolean {
  const found = fastifySymbols(reply);
  if (!found) return false;
  return (
    reply[found.serializer] === null && reply.request[found.context]?.preSerialization === null
  );
}
