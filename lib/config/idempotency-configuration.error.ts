import type { Type } from '@nestjs/common';
/** Base class of every error the library throws outside an HTTP request. */
export class IdempotencyError extends Error {
  constructor(message: string) {
    super(message);
    this.name = new.target.name;
  }
}

/**
 * Thrown at bootstrap when an option is wrong. The message names the option, the value and how
 * to fix it.
 */
export class IdempotencyConfigurationError extends IdempotencyError {
  /**
   * An option has a value the library cannot use.
   * @param option - the option's name, as written in the options object
   * @param value - the value that was given
   * @param fix - what the value should be instead
   */
  static invalidOption(option: string, value: unknown, fix: string): IdempotencyConfigurationError {
    let shown: string;
    try {
      shown =
        typeof value === 'function'
          ? 'a function'
          : typeof value === 'number' || typeof value === 'bigint'
            ? String(value)
            : JSON.stringify(value);
    } catch {
      shown = String(value);
    }
    return configurationError(`option "${option}" is invalid (got ${shown}). ${fix}`);
  }

  /**
   * An option is written where 0.1 had it, outside the group it now belongs to. Refused rather
   * than ignored, so that no setting silently falls back to its default.
   * @param option - the option's name, as given
   * @param group - the group it belongs to now
   */
  static movedOption(option: string, group: string): IdempotencyConfigurationError {
    return configurationError(
      `option "${option}" moved to "${group}.${option}". Write ` +
        `{ ${group}: { ${option}: ... } } instead (see docs/options.md).`,
    );
  }

  /**
   * The `scope` resolver returned something that does not identify a caller (an object, an
   * array, a boolean, NaN...). Thrown on every request that gets such a value.
   * @param returned - what was returned, described without its value (e.g. "an object")
   */
  static invalidScope(returned: string): IdempotencyConfigurationError {
    return configurationError(
      `the scope resolver returned ${returned}; return a string (or a number) ` +
        'that identifies the caller, e.g. scope: (req) => String(req.user.id)',
    );
  }

  /** The memory store was selected in production. */
  static memoryStoreInProduction(): IdempotencyConfigurationError {
    return configurationError(
      'the in-memory store is for unit tests only and refuses to start when ' +
        'NODE_ENV=production. Use `store: "typeorm"` (the default) with a PostgreSQL DataSource.',
    );
  }

  /** `IdempotencyModule` was imported as a bare class, without `forRoot()`/`forRootAsync()`. */
  static moduleNotConfigured(): IdempotencyConfigurationError {
    return configurationError(
      'IdempotencyModule was imported without forRoot() or forRootAsync(). ' +
        'Import IdempotencyModule.forRoot({ ... }) once: in the root module (it is global by ' +
        'default, so feature modules import nothing), or with isGlobal: false in the module that ' +
        'declares your @Idempotent() controllers, or in a shared module that re-exports ' +
        'IdempotencyModule (exports: [IdempotencyModule]) for several feature modules.',
    );
  }

  /**
   * `forRoot()`/`forRootAsync()` was imported more than once in one application (a feature module
   * importing it again): each import would be an instance with its own options, and a route
   * served by the second would silently lose the first's `scope`.
   * @param count - how many instances the application holds
   */
  static moduleConfiguredTwice(count: number): IdempotencyConfigurationError {
    return configurationError(
      `IdempotencyModule.forRoot() or forRootAsync() is imported ${count} times ` +
        'in this application; an application has one idempotency configuration. Import it once, ' +
        'in the root module (it is global by default): feature modules import nothing and just ' +
        'use @Idempotent(), with per-route options in @Idempotent({ ... }). With isGlobal: false, ' +
        'import it once in a shared module that re-exports IdempotencyModule ' +
        '(exports: [IdempotencyModule]) and import that module where it is needed.',
    );
  }

  /** No TypeORM DataSource could be found for the TypeORM store. */
  static dataSourceMissing(name: string | undefined): IdempotencyConfigurationError {
    const which = name ? `named "${name}"` : '(the default one)';
    return configurationError(
      `no TypeORM DataSource ${which} is registered. Import ` +
        `TypeOrmModule.forRoot(${name ? `{ name: '${name}', ... }` : '{ ... }'}) in your application, ` +
        "or name yours: store: typeOrmStore({ dataSource: '<name>' }) from nest-idempotency/typeorm.",
    );
  }

  /**
   * The default store (`store: 'typeorm'`) needs a package the application has not installed.
   * @param missing - the package that could not be loaded
   */
  static storeNotInstalled(missing: string): IdempotencyConfigurationError {
    return configurationError(
      `the default store is PostgreSQL through TypeORM, and "${missing}" is not ` +
        'installed. Install typeorm, @nestjs/typeorm and pg and import TypeOrmModule.forRoot(), ' +
        "or choose another store: IdempotencyModule.forRoot({ store: 'memory' }) in tests, or " +
        'your own class that extends IdempotencyStore.',
    );
  }

  /** The TypeORM DataSource is not PostgreSQL. */
  static unsupportedDatabase(type: string): IdempotencyConfigurationError {
    return configurationError(
      `the TypeORM store needs a PostgreSQL DataSource (type "postgres"); got "${type}".`,
    );
  }

  /** The record table does not exist. */
  static tableMissing(table: string): IdempotencyConfigurationError {
    return configurationError(
      `the table ${table} does not exist. Add CreateIdempotencyRecords1732233600000 ` +
        '(or createIdempotencyRecordsMigration(tableName)) to your DataSource migrations and run them.',
    );
  }

  /**
   * The record table or its jobs table lacks something this version's statements use, whatever
   * made them (an older migration, or `synchronize` with only some of the library's entities).
   * @param table - the record table, quoted
   * @param missing - each missing column or table, named
   * @param fixes - which step adds them
   */
  static schemaIncomplete(
    table: string,
    missing: string[],
    fixes: SchemaFix[],
  ): IdempotencyConfigurationError {
    return configurationError(
      `the table ${table} is missing what this version needs: ${missing.join(', ')}. ` +
        `${fixes.map((fix) => SCHEMA_FIXES[fix]).join(' ')} Migrations run in the order listed: ` +
        "after the create migration, in the order above. If TypeORM's synchronize made these " +
        'tables, list both IdempotencyRecordEntity and IdempotencyJobEntity in its entities ' +
        'instead: it makes only the tables of the entities listed.',
    );
  }

  /** `run()` named an operation no provider declares. */
  static operationNotRegistered(ref: string | Type): IdempotencyConfigurationError {
    const name = typeof ref === 'string' ? `"${ref}"` : ref.name;
    return configurationError(
      `no operation ${name} is registered. Decorate the class with ` +
        '@IdempotentOperation(name) and list it in the providers of a module of the application.',
    );
  }

  /** Two providers declare the same operation or job handler name. */
  static duplicateName(kind: string, name: string): IdempotencyConfigurationError {
    return configurationError(`two providers declare the ${kind} "${name}". Names must be unique.`);
  }

  /** An operation's steps (or a job handler) are not what the library can run. */
  static invalidOperation(name: string, problem: string): IdempotencyConfigurationError {
    return configurationError(`"${name}" cannot be registered: ${problem}.`);
  }

  /**
   * PostgreSQL lost or already had one of the store's named prepared statements: its connections
   * do not keep a server session of their own (PgBouncer in transaction pooling mode before
   * 1.21). Thrown at first use, by the statement that met it; the request fails closed (503).
   * @param answer - what PostgreSQL answered
   */
  static preparedStatementsUnsupported(answer: string): IdempotencyConfigurationError {
    return configurationError(
      `PostgreSQL answered "${answer}" to one of the store's prepared statements: these ` +
        'connections do not keep a server session of their own, as behind PgBouncer in ' +
        'transaction pooling mode before 1.21. Set IdempotencyModule.forRoot({ store: ' +
        'typeOrmStore({ preparedStatements: false }) }), or use PgBouncer 1.21+ with ' +
        'max_prepared_statements > 0.',
    );
  }

  /** The application runs on an HTTP adapter the library has no response adapter for. */
  static unsupportedHttpAdapter(type: string): IdempotencyConfigurationError {
    return configurationError(
      `@Idempotent() routes need the Express or Fastify HTTP adapter; got "${type}".`,
    );
  }

  /**
   * `@Idempotent()` on a handler that is not an HTTP route (a message, a resolver), with no
   * decorator saying how its calls carry a key: refused rather than run unprotected.
   */
  static noCallTransport(type: string, handler: string): IdempotencyConfigurationError {
    return configurationError(
      `${handler} is an ${type} handler: @Idempotent() covers HTTP routes. ` +
        'Use @IdempotentMessage() from nest-idempotency/microservices or @IdempotentMutation() ' +
        'from nest-idempotency/graphql, which say where its key comes from.',
    );
  }
}

/** An `IdempotencyConfigurationError` whose message starts with the library's name. */
function configurationError(message: string): IdempotencyConfigurationError {
  return new IdempotencyConfigurationError(`nest-idempotency: ${message}`);
}

/**
 * Which step adds a missing part of the schema (see `schemaIncomplete`).
 * @inline
 */
export type SchemaFix = 'create' | 'phases' | 'purgeAfter' | 'operationSettings' | 'jobsTable';

const SCHEMA_FIXES: Record<SchemaFix, string> = {
  create:
    'The table was not made by CreateIdempotencyRecords1732233600000 (or ' +
    'createIdempotencyRecordsMigration(tableName)): point the tableName option at the ' +
    "library's table, or drop this one and run the create migration.",
  phases:
    'AddPhasesToIdempotencyRecords1764028800000 (or createIdempotencyPhasesMigration(tableName)) ' +
    'adds the phase columns and the jobs table: add it to your DataSource migrations and run them.',
  purgeAfter:
    'AddPurgeAfterToIdempotencyRecords1764201600000 (or ' +
    'createIdempotencyPurgeAfterMigration(tableName)) adds purge_after: add it to your ' +
    'DataSource migrations and run them.',
  operationSettings:
    'AddOperationSettingsToIdempotencyRecords1764288000000 (or ' +
    'createIdempotencyOperationSettingsMigration(tableName)) adds operation_settings: add it to ' +
    'your DataSource migrations and run them.',
  jobsTable:
    'The jobs table was not made by the phases migration: drop it and let the phases migration ' +
    '(or synchronize with IdempotencyJobEntity) make it again.',
};
