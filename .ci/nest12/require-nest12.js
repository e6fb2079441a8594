/**
 * Preloaded (NODE_OPTIONS=--require) into the child processes the suite starts (the sample app,
 * the crash app) during the Nest 12 leg: their CommonJS `require('@nestjs/...')` resolves to the
 * Nest 12 install beside this file instead of the repository's Nest 11, and Node (>= 20.19) loads
 * those ESM-only packages through require(esm), as in a Nest 12 `--type cjs` application.
 * Test infrastructure only: it patches Node's CommonJS resolver, which no library code should.
 */
const Module = require('node:module');

const NEST =
  /^@nestjs\/(common|core|platform-express|platform-fastify|testing|typeorm|schedule|swagger|terminus|microservices|graphql|apollo)(\/|$)/;
const resolve = Module._resolveFilename;

Module._resolveFilename = function (request, parent, isMain, options) {
  const redirected = NEST.test(request) ? { ...options, paths: [__dirname] } : options;
  return resolve.call(this, request, parent, isMain, redirected);
};
