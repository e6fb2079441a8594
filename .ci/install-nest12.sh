#!/usr/bin/env bash
# Installs the Nest 12 line of the test matrix into .ci/nest12/node_modules, pinned by
# .ci/nest12/package-lock.json. --legacy-peer-deps: their peers (rxjs, reflect-metadata, typeorm,
# ...) are not installed there, so they resolve to the repository's single copies, as they would
# in an application. Used by `npm run test:nest12`, `npm run typecheck:nest12` and .ci/run.
set -euo pipefail
cd "$(dirname "$0")/nest12"
npm ci --legacy-peer-deps --no-audit --no-fund
node -e '
  const v = require("@nestjs/core/package.json").version;
  if (!v.startsWith("12.")) { console.error(`expected @nestjs/core 12, found ${v}`); process.exit(1); }
  console.log(`Nest 12 line installed: @nestjs/core ${v}`);
'
