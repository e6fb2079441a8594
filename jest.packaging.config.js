/**
 * The packaging test (test/packaging): `npm pack`, then new Nest 12 ESM, Nest 12 CJS and Nest 11
 * apps that install the tarball, build the README's Usage code and serve it on PostgreSQL.
 * Slow (npm installs) and needs the npm registry or a warm npm cache, so it is not part of
 * `npm test`: run it with `npm run test:packaging` (CI runs it).
 */
const base = require('./jest.config.js');

/** @type {import('jest').Config} */
module.exports = {
  ...base,
  testMatch: ['<rootDir>/test/packaging/**/*.spec.ts'],
  testPathIgnorePatterns: ['/node_modules/'],
  testTimeout: 120000,
};
