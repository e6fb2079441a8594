/**
 * The Nest 12 leg of the test matrix. Nest 12's packages are ESM-only, and Jest's CommonJS
 * runtime cannot load ESM on Node 20 (it can only from Node 24.9 on), so this runs the same suite
 * in Jest's ESM mode:
 *
 *   bash .ci/install-nest12.sh && npm run test:nest12
 *
 * (`node --experimental-vm-modules node_modules/jest/bin/jest.js --runInBand -c` this file).
 *
 * `@nestjs/*` come from the Nest 12 install in .ci/nest12 (NEST12_DIR to use another); every
 * other package (typeorm, rxjs, reflect-metadata, pg, ...) keeps its single copy in the
 * repository's node_modules. Test files are compiled to ESM by ts-jest, with `jest`,
 * `__dirname` and `__filename` supplied (.ci/nest12/jest-esm-transform.js). Child processes
 * (the sample app, the crash app) load Nest 12 through .ci/nest12/require-nest12.js, which this
 * config adds to NODE_OPTIONS.
 */
const fs = require('node:fs');
const path = require('node:path');
const base = require('./jest.config.js');

const NEST_PACKAGES =
  'common|core|platform-express|platform-fastify|testing|typeorm|schedule|swagger|terminus|microservices|graphql|apollo';
const nest12 = path.resolve(__dirname, process.env.NEST12_DIR || '.ci/nest12', 'node_modules');
if (!fs.existsSync(path.join(nest12, '@nestjs/core/package.json'))) {
  throw new Error(`The Nest 12 line is not installed in ${nest12}: run bash .ci/install-nest12.sh`);
}

/** @type {import('jest').Config} */
module.exports = {
  ...base,
  extensionsToTreatAsEsm: ['.ts'],
  transform: {
    '^.+\\.ts$': [
      '<rootDir>/.ci/nest12/jest-esm-transform.js',
      { tsconfig: 'tsconfig.jest-esm.json', useESM: true },
    ],
  },
  moduleNameMapper: {
    [`^@nestjs/(${NEST_PACKAGES})(/.*)?$`]: `${nest12}/@nestjs/$1$2`,
  },
  // The API reference check runs TypeDoc in a child process on lib/ with the repository's own
  // node_modules (the Nest 11 typings) whichever leg runs it: the Nest 11 leg does, once is enough.
  // So does the docs run: it type-checks and runs the pages against Nest 12 itself, in temporary
  // apps, whichever leg runs it. The fallback check of fastify-serialized-send loads a fresh copy
  // of its module with require(), which cannot load Nest 12's ESM; what it checks (Fastify's
  // symbols, one warning) does not depend on the Nest line.
  // Each spec file evaluates Nest 12's ESM afresh in its own VM context, so its first app's
  // bootstrap is slower than on the CommonJS leg: on a loaded 2-core host one took over the base
  // 30 s once (a clean-clone run on 679bdd1). Hooks and tests that set no timeout get 90 s here.
  testTimeout: 90_000,
  testPathIgnorePatterns: [
    ...base.testPathIgnorePatterns,
    '<rootDir>/test/unit/api-reference.spec.ts',
    '<rootDir>/test/e2e/docs-run.e2e-spec.ts',
    '<rootDir>/test/unit/fastify-serialized-send.spec.ts',
  ],
};

// Child processes inherit this (tests spawn them with `{ ...process.env }`).
const preload = `--require=${JSON.stringify(path.join(__dirname, '.ci/nest12/require-nest12.js'))}`;
if (!(process.env.NODE_OPTIONS ?? '').includes(preload)) {
  process.env.NODE_OPTIONS = [process.env.NODE_OPTIONS, preload].filter(Boolean).join(' ');
}
