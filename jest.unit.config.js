/**
 * The unit project: the tests under test/unit, which need no database, so no global setup (no
 * DATABASE_URL, no Docker). `npm run test:unit` runs it in seconds; `npm test` still runs these
 * with everything else (jest.config.js).
 */
const base = require('./jest.config.js');

/** @type {import('jest').Config} */
module.exports = {
  ...base,
  testMatch: ['<rootDir>/test/unit/**/*.spec.ts'],
  globalSetup: undefined,
  globalTeardown: undefined,
};
