/** @type {import('jest').Config} */
module.exports = {
  rootDir: '.',
  testEnvironment: 'node',
  transform: { '^.+\\.ts$': ['ts-jest', { tsconfig: 'tsconfig.json' }] },
  moduleFileExtensions: ['ts', 'js', 'json'],
  testMatch: ['<rootDir>/test/**/*.spec.ts', '<rootDir>/test/**/*.e2e-spec.ts'],
  // the packaging test has its own config (jest.packaging.config.js)
  testPathIgnorePatterns: ['/node_modules/', '<rootDir>/test/packaging/'],
  // PostgreSQL for the run; test/unit needs none and runs without it (jest.unit.config.js)
  globalSetup: '<rootDir>/test/fixtures/global-setup.ts',
  globalTeardown: '<rootDir>/test/fixtures/global-teardown.ts',
  testTimeout: 30000,
};
