import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import type { INestApplication } from '@nestjs/common';
import { DocumentBuilder, SwaggerModule } from '@nestjs/swagger';
import type { OpenAPIObject } from '@nestjs/swagger';
import { ACCOUNT_HEADER } from '../accounts/account-id';
import type { SampleHttpAdapter } from '../config/sample-app.config';

/** Where the sample serves Swagger UI; the document is at `${DOCS_PATH}-json`. */
export const DOCS_PATH = 'docs';

/**
 * The sample's OpenAPI document. Built from the running app: `@Idempotent()` routes are
 * documented by the library itself (key header, `Idempotent-Replayed`, 400/409/422/503).
 */
export function createApiDocument(app: INestApplication): OpenAPIObject {
  const config = new DocumentBuilder()
    .setTitle('nest-idempotency sample payments API')
    .setDescription(
      'Payments and refunds made safe to retry with the Idempotency-Key header. Every call ' +
        `names its account in the ${ACCOUNT_HEADER} header (a stand-in for authentication).`,
    )
    .setVersion('1.0')
    .addApiKey({ type: 'apiKey', in: 'header', name: ACCOUNT_HEADER }, 'account')
    .addSecurityRequirements('account')
    .build();
  return SwaggerModule.createDocument(app, config);
}

/**
 * Serves Swagger UI at `/docs` and the document at `/docs-json` (built on the first request).
 * Call before `app.init()`.
 *
 * On Express this is `SwaggerModule.setup()`. On Fastify, `SwaggerModule.setup()` serves the
 * UI's files through `@fastify/static`, which the sample does not depend on: there it serves the
 * document only, and the page and the two files it needs are routes of their own here.
 */
export function setupApiDocs(app: INestApplication, adapter: SampleHttpAdapter): void {
  let document: OpenAPIObject | undefined;
  const getDocument = () => (document ??= createApiDocument(app));
  if (adapter === 'express') {
    SwaggerModule.setup(DOCS_PATH, app, getDocument, { customSiteTitle: 'Sample payments API' });
    return;
  }
  SwaggerModule.setup(DOCS_PATH, app, getDocument, { ui: false });
  serveSwaggerUiOnFastify(app);
}

const UI_PAGE = `<!DOCTYPE html>
<html lang="en">
<head>
  <meta charset="utf-8">
  <title>Sample payments API</title>
  <link rel="stylesheet" href="/${DOCS_PATH}/swagger-ui.css">
</head>
<body>
  <div id="swagger-ui"></div>
  <script src="/${DOCS_PATH}/swagger-ui-bundle.js"></script>
  <script src="/${DOCS_PATH}/swagger-ui-init.js"></script>
</body>
</html>
`;

const UI_INIT = `window.ui = SwaggerUIBundle({ url: '/${DOCS_PATH}-json', dom_id: '#swagger-ui' });\n`;

/** The UI page, its script and the two swagger-ui-dist files, as Fastify routes. */
function serveSwaggerUiOnFastify(app: INestApplication): void {
  // swagger-ui-dist is @nestjs/swagger's own dependency: resolve it from there.
  const fromSwagger = createRequire(createRequire(__filename).resolve('@nestjs/swagger'));
  const dist = dirname(fromSwagger.resolve('swagger-ui-dist/package.json'));
  const files = new Map<string, { type: string; body: () => string | Buffer }>([
    ['', { type: 'text/html; charset=utf-8', body: () => UI_PAGE }],
    ['/swagger-ui-init.js', { type: 'application/javascript', body: () => UI_INIT }],
    ['/swagger-ui.css', { type: 'text/css', body: asset(join(dist, 'swagger-ui.css')) }],
    [
      '/swagger-ui-bundle.js',
      { type: 'application/javascript', body: asset(join(dist, 'swagger-ui-bundle.js')) },
    ],
  ]);
  const fastify = app.getHttpAdapter().getInstance();
  for (const [path, file] of files) {
    fastify.get(`/${DOCS_PATH}${path}`, (_request: unknown, reply: any) => {
      reply.type(file.type).send(file.body());
    });
  }
}

/** A file read on first use, then kept. */
function asset(path: string): () => Buffer {
  let bytes: Buffer | undefined;
  return () => (bytes ??= readFileSync(path));
}
