/**
 * Every page runs as written (docs/development.md, "Docs that run").
 */
import { rmSync } from 'node:fs';
import { manualFiles } from '../shared/markdown';
import { composeApp, pageFiles, writeApp } from '../fixtures/docs-app';
import { DocsTypeChecker } from '../fixtures/docs-typecheck';

jest.setTimeout(180_000);

const PAGES = process.env.DOCS_RUN_PAGES?.split(',') ?? ['README.md', ...manualFiles()];

describe('every page, pasted into a fresh Nest 12 ESM app over the README Usage files', () => {
  let checker: DocsTypeChecker;
  beforeAll(() => {
    checker = new DocsTypeChecker();
  });

  it.each(PAGES)('%s type-checks', (page) => {
    const files = composeApp(page, 'nest12-esm');
    const dir = writeApp(files, 'module');
    try {
      expect([...pageFiles(page).problems, ...checker.check(dir, files)]).toEqual([]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
