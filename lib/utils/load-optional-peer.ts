/**
 * An optional peer dependency (`@nestjs/schedule`, `@nestjs/swagger`, `@opentelemetry/api`),
 * loaded on first use rather than imported, so an application without it never loads it.
 *
 * The published build is CommonJS and uses `require`, which returns the application's own module
 * instance in a CommonJS app and, through `require(esm)`, in a Nest 12 ESM app too; so does
 * Jest's CommonJS runtime. Where the code runs as ESM (Jest's ESM mode, used for the Nest 12 test
 * leg) `require` does not exist and `import()` does the same.
 *
 * @param name - the package's name
 * @returns the package, or `undefined` when it is not installed
 * @throws what loading it threw, when it is installed but fails to load
 */
export async function loadOptionalPeer<T>(name: string): Promise<T | undefined> {
  try {
    return (
      typeof require === 'function'
        ? // eslint-disable-next-line @typescript-eslint/no-require-imports
          require(name)
        : await import(name)
    ) as T;
  } catch (error) {
    const { code, message } = (error ?? {}) as NodeJS.ErrnoException;
    const missing =
      (code === 'MODULE_NOT_FOUND' || code === 'ERR_MODULE_NOT_FOUND') &&
      String(message).includes(`'${name}'`);
    if (missing) return undefined;
    throw error;
  }
}
