/**
 * OpenAPI: with `@nestjs/swagger` installed, `@Idempotent()` documents its routes by itself (the
 * key header, `Idempotent-Replayed`, 400 / 409 / 413 / 422 / 503 with the shared problem+json schema;
 * `Prefer` and `Preference-Applied` on a route that may wait), and leaves every other route as
 * the application declared it. The documents are checked by an
 * OpenAPI validator (@seriousme/openapi-schema-validator, ESM-only: run in a child process) and
 * field by field: the sample app's, served at /docs-json on both adapters, and those of small
 * apps with class-level, inherited and re-configured routes.
 */
import { internalEnabled } from '../../lib/internals/internal-switch';
import { SWAGGER_PLUGIN_RESPONSE } from '../../lib/internals/swagger-plugin-response';
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import {
  Controller,
  Delete,
  Get,
  HttpCode,
  Module,
  Patch,
  Post,
  Put,
  type Type,
} from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { FastifyAdapter } from '@nestjs/platform-fastify';
import {
  ApiBadRequestResponse,
  ApiCreatedResponse,
  ApiHeader,
  ApiOkResponse,
  ApiProperty,
  DocumentBuilder,
  SwaggerModule,
} from '@nestjs/swagger';
import request from 'supertest';
import { IdempotencyModule, Idempotent } from '../../lib';
import type { IdempotencyModuleOptions } from '../../lib';
import { createTestDatabase } from '../fixtures/database';
import type { TestDatabase } from '../fixtures/database';
import { startSampleApp } from '../fixtures/sample-app';
import type { InProcessSampleApp } from '../fixtures/sample-app';

/** The stable codes, as the README's Errors table lists them. */
const CODES = [
  'idempotency_key_missing',
  'idempotency_key_invalid',
  'idempotency_key_reused',
  'idempotency_key_in_use',
  'idempotency_store_unavailable',
  'idempotency_body_unreadable',
  'idempotency_scope_invalid',
  'idempotency_scope_missing',
  'idempotency_transaction_unavailable',
  'idempotency_retry_later',
  'idempotency_operation_abandoned',
  'idempotency_operation_unavailable',
  'idempotency_operation_input_invalid',
  'idempotency_record_unreadable',
  'idempotency_request_too_large',
  'idempotency_response_not_stored',
  'idempotency_webhook_signature_invalid',
];
const PROBLEM_REF = '#/components/schemas/IdempotencyProblem';
const PROBLEM_STATUSES = ['400', '409', '413', '422', '503'];

const VALIDATE = `
import { Validator } from '@seriousme/openapi-schema-validator';
let text = '';
for await (const chunk of process.stdin) text += chunk;
const result = await new Validator().validate(JSON.parse(text));
process.stdout.write(JSON.stringify(result));
`;

/** Validates a document against the OpenAPI schema of its version. */
function validate(document: object): { valid: boolean; errors?: unknown } {
  const child = spawnSync(process.execPath, ['--input-type=module', '-e', VALIDATE], {
    cwd: join(__dirname, '../..'),
    input: JSON.stringify(document),
    encoding: 'utf8',
    timeout: 30_000,
  });
  if (child.status !== 0) throw new Error(`validator failed: ${child.stderr}`);
  return JSON.parse(child.stdout);
}

function expectValid(document: object): void {
  const result = validate(document);
  expect(result.errors).toBeUndefined();
  expect(result.valid).toBe(true);
}

/** Checks one operation is documented as idempotent, with the given key header. */
function expectIdempotent(
  operation: any,
  { header = 'Idempotency-Key', required = true, success = '201', retryAfter = 1 } = {},
): void {
  const keys = operation.parameters.filter(
    (p: any) => p.in === 'header' && p.name.toLowerCase() === header.toLowerCase(),
  );
  expect(keys).toHaveLength(1);
  const [key] = keys;
  expect(key).toMatchObject({ name: header, in: 'header', required });
  expect(key.schema).toMatchObject({ type: 'string', minLength: 1 });
  expect(key.schema.example).toBe('8e03978e-40d5-43e8-bc93-6894a57f9324');
  const pattern = new RegExp(key.schema.pattern);
  for (const ok of ['a', 'x'.repeat(255), key.schema.example, '"a,b"', '"q\\"uote"', 'a b'])
    expect(pattern.test(ok)).toBe(true);
  for (const bad of ['', 'x'.repeat(256), 'a,b', 'é', '"unterminated', '"bad\\escape"', 'tab\t'])
    expect(pattern.test(bad)).toBe(false);
  expect(key.description).toMatch(/1 to 255 printable ASCII/);
  expect(key.description).toMatch(/RFC 8941/);

  expect(operation.responses[success].headers['Idempotent-Replayed']).toEqual({
    description: expect.stringMatching(/replayed/),
    schema: { type: 'string', enum: ['true'] },
  });
  for (const status of PROBLEM_STATUSES) {
    const response = operation.responses[status];
    expect(response.description).toEqual(expect.any(String));
    expect(response.headers['Cache-Control'].schema).toEqual({
      type: 'string',
      enum: ['no-store'],
    });
    const retry = response.headers['Retry-After'];
    if (status === '409' || status === '503') {
      expect(retry.schema).toEqual({ type: 'integer', minimum: 0, example: retryAfter });
    } else {
      expect(retry).toBeUndefined();
    }
  }
}

/** The problem+json content of one error response: its schema and example codes. */
function problemContent(operation: any, status: string): { ref: string; codes: string[] } {
  const content = operation.responses[status].content;
  expect(Object.keys(content)).toContain('application/problem+json');
  const media = content['application/problem+json'];
  for (const [code, example] of Object.entries<any>(media.examples)) {
    expect(example.value).toMatchObject({ code, status: Number(status), type: expect.any(String) });
  }
  return { ref: media.schema.$ref, codes: Object.keys(media.examples) };
}

function expectProblemSchema(document: any): void {
  const schema = document.components.schemas.IdempotencyProblem;
  expect(schema).toMatchObject({
    type: 'object',
    required: expect.arrayContaining(['type', 'title', 'status', 'detail', 'code']),
  });
  expect(schema.properties.code).toMatchObject({ type: 'string', enum: CODES });
  expect(schema.properties.status.type).toBe('integer');
  expect(schema.properties.type).toMatchObject({ type: 'string', format: 'uri' });
}

/**
 * Checks one operation documents waiting: the optional `Prefer` parameter (unless `ownPrefer`,
 * the application's own declaration, left alone) and `Preference-Applied` on its success
 * response and its 409, nowhere else.
 */
function expectWaits(
  operation: any,
  { maxSeconds, example = `wait=${maxSeconds}`, success = '201', ownPrefer = false }: any,
): void {
  const prefer = operation.parameters.filter(
    (p: any) => p.in === 'header' && p.name.toLowerCase() === 'prefer',
  );
  expect(prefer).toHaveLength(1);
  if (ownPrefer) {
    expect(prefer[0].description).toBe('Our own preferences.');
  } else {
    expect(prefer[0]).toEqual({
      name: 'Prefer',
      in: 'header',
      required: false,
      description: expect.stringContaining(
        `wait=N asks to wait up to N seconds (capped at ${maxSeconds}`,
      ),
      schema: { type: 'string', example },
    });
    expect(prefer[0].description).toMatch(/request in flight with the same Idempotency-Key/);
    expect(prefer[0].description).toMatch(/instead of 409 idempotency_key_in_use/);
  }
  for (const status of [success, '409']) {
    const applied = operation.responses[status].headers['Preference-Applied'];
    expect(applied).toEqual({
      description: expect.stringContaining(`capped at ${maxSeconds}`),
      schema: { type: 'string', pattern: '^wait=\\d+$', example },
    });
    const pattern = new RegExp(applied.schema.pattern);
    expect(pattern.test(example)).toBe(true);
    for (const bad of ['wait=', 'wait=1.5', 'return=minimal', 'wait=10, x']) {
      expect(pattern.test(bad)).toBe(false);
    }
  }
  for (const [status, response] of Object.entries<any>(operation.responses)) {
    if (status !== success && status !== '409') {
      expect(response.headers?.['Preference-Applied']).toBeUndefined();
    }
  }
  expect(operation.responses['409'].description).toMatch(/Prefer: wait=N waits for it first/);
}

/** Checks one operation documents no waiting at all. */
function expectNoWait(operation: any): void {
  expect(JSON.stringify(operation)).not.toMatch(/Prefer/);
}

/** An operation as Swagger shows a route nobody documented: only its default response. */
function expectUndocumented(operation: any, success = '201'): void {
  expect(operation.parameters.filter((p: any) => p.in === 'header')).toEqual([]);
  expect(operation.responses).toEqual({ [success]: { description: '' } });
}

describe.each(['express', 'fastify'] as const)('the sample app’s document (%s)', (adapter) => {
  let db: TestDatabase;
  let sample: InProcessSampleApp;
  let document: any;

  beforeAll(async () => {
    db = await createTestDatabase();
    sample = await startSampleApp(adapter, db, { jobsIntervalSeconds: 3600 });
    const response = await request(sample.server).get('/docs-json').expect(200);
    expect(response.headers['content-type']).toMatch(/^application\/json/);
    document = JSON.parse(response.text);
  });

  afterAll(async () => {
    await sample?.close();
    await db?.drop();
  });

  it('is a valid OpenAPI document', () => {
    expect(document.openapi).toMatch(/^3\./);
    expectValid(document);
  });

  it('documents POST /payments and POST /payments/{paymentId}/refunds as idempotent', () => {
    expectProblemSchema(document);
    for (const path of ['/payments', '/payments/{paymentId}/refunds']) {
      const operation = document.paths[path].post;
      expectIdempotent(operation);
      // The sample app sets a scope: a request without a caller is a 400 too.
      expect(problemContent(operation, '400')).toEqual({
        ref: PROBLEM_REF,
        codes: ['idempotency_key_missing', 'idempotency_key_invalid', 'idempotency_scope_missing'],
      });
      expect(problemContent(operation, '409')).toEqual({
        ref: PROBLEM_REF,
        codes: [
          'idempotency_key_in_use',
          'idempotency_operation_abandoned',
          'idempotency_response_not_stored',
        ],
      });
      expect(problemContent(operation, '413')).toEqual({
        ref: PROBLEM_REF,
        codes: ['idempotency_request_too_large'],
      });
      expect(problemContent(operation, '422')).toEqual({
        ref: PROBLEM_REF,
        codes: ['idempotency_key_reused'],
      });
      expect(problemContent(operation, '503')).toEqual({
        ref: PROBLEM_REF,
        codes: ['idempotency_store_unavailable', 'idempotency_retry_later'],
      });
      expect(Object.keys(operation.responses).sort()).toEqual(['201', ...PROBLEM_STATUSES]);
    }
  });

  it('documents Prefer and Preference-Applied on POST /payments (wait: 10 s), not on refunds', () => {
    expectWaits(document.paths['/payments'].post, { maxSeconds: 10 });
    expectNoWait(document.paths['/payments/{paymentId}/refunds'].post);
    expectNoWait(document.paths['/webhooks/provider'].post);
  });

  it('documents POST /webhooks/provider by its signature header, with no key and no 413 or 422', () => {
    const operation = document.paths['/webhooks/provider'].post;
    const headers = operation.parameters.filter((p: any) => p.in === 'header');
    expect(headers).toEqual([
      expect.objectContaining({ name: 'Provider-Signature', required: true }),
    ]);
    expect(JSON.stringify(operation.parameters)).not.toMatch(/Idempotency-Key/);
    expect(Object.keys(operation.responses).sort()).toEqual(['200', '400', '409', '503']);
    expect(operation.responses['200'].headers['Idempotent-Replayed']).toBeDefined();
    expect(problemContent(operation, '400')).toEqual({
      ref: PROBLEM_REF,
      codes: ['idempotency_webhook_signature_invalid'],
    });
  });

  it('leaves the routes without @Idempotent() as they were (GET /payments, /health, ...)', () => {
    const gets = Object.entries<any>(document.paths).flatMap(([path, item]) =>
      item.get ? [[path, item.get]] : [],
    );
    expect(gets.map(([path]) => path)).toEqual(
      expect.arrayContaining(['/payments', '/payments/{id}', '/health', '/provider/charges']),
    );
    expectUndocumented(document.paths['/payments'].get, '200');
    for (const [, operation] of gets) {
      expect(JSON.stringify(operation)).not.toMatch(/Idempotency-Key|Idempotent-Replayed/);
      expect(JSON.stringify(operation)).not.toContain(PROBLEM_REF);
    }
  });

  it('serves Swagger UI at /docs', async () => {
    const page = await request(sample.server).get('/docs').expect(200);
    expect(page.headers['content-type']).toMatch(/^text\/html/);
    expect(page.text).toContain('swagger-ui');
    const scripts = [...page.text.matchAll(/<script src="([^"]+)"/g)].map((m) => m[1]);
    expect(scripts.length).toBeGreaterThan(0);
    for (const src of scripts) {
      const path = new URL(src, 'http://sample/docs').pathname;
      const script = await request(sample.server).get(path).expect(200);
      expect(script.headers['content-type']).toMatch(/javascript/);
    }
  });
});

class ItemDto {
  @ApiProperty()
  id!: string;
}

@Controller('items')
@Idempotent()
class ItemsController {
  @Post()
  @ApiCreatedResponse({ type: ItemDto, description: 'The item' })
  @ApiBadRequestResponse({ description: 'The body is invalid.' })
  create() {
    return { id: '1' };
  }

  @Put(':id')
  replace() {
    return { id: '1' };
  }

  @Patch(':id')
  @Idempotent({ request: { required: true }, errors: { retryAfterSeconds: 7 } })
  update() {
    return { id: '1' };
  }

  @Delete(':id')
  @HttpCode(204)
  remove() {
    return undefined;
  }

  @Post('search')
  @HttpCode(200)
  search() {
    return [];
  }

  @Get()
  list() {
    return [];
  }
}

abstract class CreateBase {
  @Post()
  create() {
    return {};
  }
}

@Controller('inherited')
@Idempotent()
class InheritedController extends CreateBase {}

/** Inherits the same handler as InheritedController, with no @Idempotent(). */
@Controller('inherited-plain')
class InheritedPlainController extends CreateBase {}

@Idempotent()
abstract class IdempotentBase {}

@Controller('subclassed')
class SubclassedController extends IdempotentBase {
  @Post()
  create() {
    return {};
  }
}

@Controller('single')
class SingleController {
  @Post()
  @Idempotent({ request: { header: 'X-Request-Key' } })
  create() {
    return {};
  }

  @Post('other')
  other() {
    return {};
  }
}

/** What the @nestjs/swagger CLI plugin generates for a controller. */
@Controller('plugin')
class PluginController {
  static _OPENAPI_METADATA_FACTORY() {
    return { create: { type: ItemDto } };
  }

  @Post()
  @Idempotent()
  create() {
    return { id: '1' };
  }
}

const CONTROLLERS: Type[] = [
  ItemsController,
  InheritedController,
  InheritedPlainController,
  SubclassedController,
  SingleController,
  PluginController,
];

async function documentOf(options: IdempotencyModuleOptions): Promise<any> {
  @Module({
    imports: [IdempotencyModule.forRoot({ store: 'memory', purge: false, ...options })],
    controllers: CONTROLLERS,
  })
  class AppModule {}
  const app = await NestFactory.create(AppModule, { logger: false });
  try {
    const document = SwaggerModule.createDocument(app, new DocumentBuilder().build());
    return JSON.parse(JSON.stringify(document));
  } finally {
    await app.close();
  }
}

/** Every operation of a document, as `METHOD path`. */
function operations(document: any): Map<string, any> {
  const all = new Map<string, any>();
  for (const [path, item] of Object.entries<any>(document.paths)) {
    for (const [method, operation] of Object.entries(item)) {
      all.set(`${method.toUpperCase()} ${path}`, operation);
    }
  }
  return all;
}

const COVERED = [
  'POST /items',
  'PUT /items/{id}',
  'PATCH /items/{id}',
  'DELETE /items/{id}',
  'POST /items/search',
  'POST /inherited',
  'POST /subclassed',
  'POST /single',
  'POST /plugin',
];

describe('documenting @Idempotent() routes', () => {
  let on: any;
  let off: any;

  beforeAll(async () => {
    on = await documentOf({});
    off = await documentOf({ openApi: false });
  });

  it('produces valid documents', () => {
    expectValid(on);
    expectValid(off);
  });

  it('documents exactly the unsafe routes @Idempotent() covers, own and inherited', () => {
    const documented = [...operations(on)]
      .filter(([, operation]) => JSON.stringify(operation).includes('Idempotent-Replayed'))
      .map(([name]) => name);
    expect(documented.sort()).toEqual([...COVERED].sort());
    expectProblemSchema(on);
    expectIdempotent(on.paths['/items'].post);
    expectIdempotent(on.paths['/items/{id}'].put, { success: '200' });
    expectIdempotent(on.paths['/items/{id}'].patch, { success: '200', retryAfter: 7 });
    expectIdempotent(on.paths['/items/{id}'].delete, { success: '204' });
    expectIdempotent(on.paths['/items/search'].post, { success: '200' });
    expectIdempotent(on.paths['/inherited'].post);
    expectIdempotent(on.paths['/subclassed'].post);
    expectIdempotent(on.paths['/single'].post, { header: 'X-Request-Key' });
    expectIdempotent(on.paths['/plugin'].post);
  });

  it('leaves every other route exactly as it is without the library’s documentation', () => {
    const withDocs = operations(on);
    const without = operations(off);
    expect([...withDocs.keys()].sort()).toEqual([...without.keys()].sort());
    for (const [name, operation] of without) {
      if (!COVERED.includes(name)) expect(withDocs.get(name)).toEqual(operation);
    }
    expectUndocumented(on.paths['/inherited-plain'].post);
    expectUndocumented(on.paths['/single/other'].post);
    expectUndocumented(on.paths['/items'].get, '200');
  });

  it('keeps what the application declared, adding to it', () => {
    const create = on.paths['/items'].post;
    expect(create.responses['201']).toMatchObject({
      description: 'The item',
      content: { 'application/json': { schema: { $ref: '#/components/schemas/ItemDto' } } },
    });
    expect(create.responses['400'].description).toMatch(
      /^The body is invalid\.\n\nThe Idempotency-Key/,
    );
    expect(problemContent(create, '400').ref).toBe(PROBLEM_REF);
    // the CLI plugin's response type survives (Swagger skips it once a route has responses);
    // run with NEST_IDEMPOTENCY_PLAIN=swagger-plugin-response, the success response has no type
    const plugin = on.paths['/plugin'].post.responses['201'];
    if (internalEnabled(SWAGGER_PLUGIN_RESPONSE)) {
      expect(plugin.content['application/json'].schema).toEqual({
        $ref: '#/components/schemas/ItemDto',
      });
    } else {
      expect(plugin.content).toBeUndefined();
    }
  });

  it('with openApi: false documents nothing', () => {
    for (const name of COVERED) {
      const [method, path] = name.split(' ');
      const operation = off.paths[path][method.toLowerCase()];
      expect(JSON.stringify(operation)).not.toMatch(/Idempotency-Key|X-Request-Key|Replayed/);
      expect(Object.keys(operation.responses).filter((s) => PROBLEM_STATUSES.includes(s))).toEqual(
        name === 'POST /items' ? ['400'] : [],
      );
    }
    expect(off.components.schemas.IdempotencyProblem).toBeUndefined();
  });

  it('follows the module options, and a later app with other options in the same process', async () => {
    const custom = await documentOf({
      request: { header: 'X-Idempotency-Key', required: false },
      errors: { retryAfterSeconds: 3, problemTypeBaseUri: 'https://errors.example.com/' },
    });
    expectValid(custom);
    const create = custom.paths['/items'].post;
    expectIdempotent(create, { header: 'X-Idempotency-Key', required: false, retryAfter: 3 });
    expect(create.parameters.some((p: any) => p.name === 'Idempotency-Key')).toBe(false);
    expect(problemContent(create, '400').codes).toEqual(['idempotency_key_invalid']);
    const update = custom.paths['/items/{id}'].patch;
    expectIdempotent(update, { header: 'X-Idempotency-Key', success: '200', retryAfter: 7 });
    expect(problemContent(update, '400').codes).toEqual([
      'idempotency_key_missing',
      'idempotency_key_invalid',
    ]);
    const example = create.responses['422'].content['application/problem+json'].examples;
    expect(example.idempotency_key_reused.value.type).toBe(
      'https://errors.example.com/idempotency_key_reused',
    );
    // documenting again from scratch: no parameter or description is added twice. (Plain,
    // the first document differs: swagger itself writes the plugin's response on the handler
    // while making a document, and a later app starts from that.)
    const again = await documentOf({});
    expect(again).toEqual(internalEnabled(SWAGGER_PLUGIN_RESPONSE) ? on : await documentOf({}));
  });

  it('with errorBody documents the statuses and headers, not a problem+json body', async () => {
    const shaped = await documentOf({
      errors: { errorBody: (problem) => ({ body: { error: { code: problem.code } } }) },
    });
    expectValid(shaped);
    const operation = shaped.paths['/items/{id}'].put;
    expectIdempotent(operation, { success: '200' });
    for (const status of PROBLEM_STATUSES) {
      expect(operation.responses[status].content).toBeUndefined();
      expect(operation.responses[status].description).toMatch(/errorBody/);
    }
    expect(shaped.components.schemas.IdempotencyProblem).toBeUndefined();
  });
});

@Controller('waits')
class WaitsController {
  @Post()
  @Idempotent({ wait: { maxSeconds: 5 } })
  create() {
    return {};
  }

  @Post('long')
  @HttpCode(200)
  @Idempotent({ wait: { maxSeconds: 30, defaultSeconds: 2 } })
  @ApiHeader({ name: 'prefer', description: 'Our own preferences.', required: false })
  @ApiOkResponse({
    description: 'Done.',
    headers: { 'Preference-Applied': { description: 'Ours.', schema: { type: 'string' } } },
  })
  long() {
    return {};
  }

  @Post('plain')
  @Idempotent()
  plain() {
    return {};
  }

  @Post('never')
  @Idempotent({ wait: { maxSeconds: 0 } })
  never() {
    return {};
  }
}

describe.each(['express', 'fastify'] as const)(
  'documenting routes that may wait (%s)',
  (adapter) => {
    async function waitDocumentOf(options: IdempotencyModuleOptions): Promise<any> {
      @Module({
        imports: [IdempotencyModule.forRoot({ store: 'memory', purge: false, ...options })],
        controllers: [WaitsController],
      })
      class AppModule {}
      const app =
        adapter === 'fastify'
          ? await NestFactory.create(AppModule, new FastifyAdapter(), { logger: false })
          : await NestFactory.create(AppModule, { logger: false });
      try {
        const document = SwaggerModule.createDocument(app, new DocumentBuilder().build());
        return JSON.parse(JSON.stringify(document));
      } finally {
        await app.close();
      }
    }

    it('a route with wait gets Prefer and Preference-Applied; one without gets neither', async () => {
      const document = await waitDocumentOf({});
      expectValid(document);
      expectWaits(document.paths['/waits'].post, { maxSeconds: 5 });
      expectIdempotent(document.paths['/waits'].post);
      expectNoWait(document.paths['/waits/plain'].post);
      expectIdempotent(document.paths['/waits/plain'].post);
      expectNoWait(document.paths['/waits/never'].post);
    });

    it('leaves the application’s own Prefer parameter and Preference-Applied header alone', async () => {
      const document = await waitDocumentOf({});
      const long = document.paths['/waits/long'].post;
      expect(long.parameters.filter((p: any) => p.name.toLowerCase() === 'prefer')).toEqual([
        expect.objectContaining({ name: 'prefer', description: 'Our own preferences.' }),
      ]);
      expect(long.responses['200'].description).toBe('Done.');
      expect(long.responses['200'].headers['Preference-Applied']).toEqual({
        description: 'Ours.',
        schema: { type: 'string' },
      });
      expect(long.responses['409'].headers['Preference-Applied'].schema.example).toBe('wait=10');
    });

    it('follows the resolved wait: the module’s, unless the route turns it off', async () => {
      const document = await waitDocumentOf({ wait: { maxSeconds: 3, defaultSeconds: 1 } });
      expectValid(document);
      expectWaits(document.paths['/waits/plain'].post, { maxSeconds: 3 });
      expect(
        document.paths['/waits/plain'].post.parameters.find((p: any) => p.name === 'Prefer')
          .description,
      ).toMatch(/Without it, such a duplicate waits 1 s; wait=0 asks not to wait/);
      expectWaits(document.paths['/waits'].post, { maxSeconds: 5 });
      expectNoWait(document.paths['/waits/never'].post);
    });
  },
);
