/**
 * ts-jest for Jest's ESM mode (the Nest 12 leg), plus the module-scoped names the suite uses as
 * CommonJS and that ESM modules lack: the `jest` object (imported from '@jest/globals', as Jest
 * documents for ESM) and `__dirname` / `__filename` (this file's path). They are prepended on the
 * first generated line, so line numbers in stack traces stay right. `require` is not provided:
 * a test that needs a module imports it.
 */
const { dirname } = require('node:path');
const { TsJestTransformer } = require('ts-jest');

const VERSION = 'esm-globals-1';

function withModuleGlobals(result, sourceText, sourcePath, options) {
  if (!options.supportsStaticESM) return result;
  const prelude = [];
  if (/\bjest\./.test(sourceText) && !sourceText.includes('@jest/globals')) {
    prelude.push("import { jest } from '@jest/globals';");
  }
  if (/\b__(dirname|filename)\b/.test(sourceText)) {
    const [file, dir] = [sourcePath, dirname(sourcePath)].map((path) => JSON.stringify(path));
    prelude.push(`const __filename = ${file}, __dirname = ${dir};`);
  }
  return prelude.length ? { ...result, code: prelude.join(' ') + ' ' + result.code } : result;
}

class EsmTransformer extends TsJestTransformer {
  process(sourceText, sourcePath, options) {
    return withModuleGlobals(
      super.process(sourceText, sourcePath, options),
      sourceText,
      sourcePath,
      options,
    );
  }

  async processAsync(sourceText, sourcePath, options) {
    const result = await super.processAsync(sourceText, sourcePath, options);
    return withModuleGlobals(result, sourceText, sourcePath, options);
  }

  getCacheKey(...args) {
    return `${super.getCacheKey(...args)}:${VERSION}`;
  }

  async getCacheKeyAsync(...args) {
    return `${await super.getCacheKeyAsync(...args)}:${VERSION}`;
  }
}

module.exports = { createTransformer: (config) => new EsmTransformer(config) };
