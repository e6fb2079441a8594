/**
 * Reading the @nestjs/swagger CLI plugin's response: the type it inferred, from the route's class
 * or a base class; nothing with `NEST_IDEMPOTENCY_PLAIN=swagger-plugin-response`; and, when a
 * controller's factory is not a function (a changed plugin), nothing and one warning.
 */
import { Logger } from '@nestjs/common';
import { pluginResponseOf } from '../../lib/internals/swagger-plugin-response';

class ItemDto {}

class Base {
  static _OPENAPI_METADATA_FACTORY() {
    return { create: { type: ItemDto, summary: 'Create', status: 201, description: 'made' } };
  }
  create() {}
}
class Derived extends Base {}

describe('pluginResponseOf', () => {
  let warn: jest.SpyInstance;
  beforeEach(() => {
    warn = jest.spyOn(Logger.prototype, 'warn').mockImplementation(() => undefined);
  });
  afterEach(() => {
    warn.mockRestore();
    delete process.env.NEST_IDEMPOTENCY_PLAIN;
  });

  it("gives the plugin's response, without what belongs to the operation, from a base class too", () => {
    expect(pluginResponseOf(Derived, 'create')).toEqual({ type: ItemDto, description: 'made' });
    expect(pluginResponseOf(Derived, 'other')).toEqual({});
    expect(warn).not.toHaveBeenCalled();
  });

  it('gives nothing, silently, when NEST_IDEMPOTENCY_PLAIN names it', () => {
    process.env.NEST_IDEMPOTENCY_PLAIN = 'swagger-plugin-response';
    expect(pluginResponseOf(Derived, 'create')).toEqual({});
    expect(warn).not.toHaveBeenCalled();
  });

  it('falls back when the factory is not a function, and warns once', () => {
    class Changed {
      static _OPENAPI_METADATA_FACTORY = { create: { type: ItemDto } };
      create() {}
    }
    expect(pluginResponseOf(Changed, 'create')).toEqual({});
    expect(pluginResponseOf(Changed, 'create')).toEqual({});
    expect(warn).toHaveBeenCalledTimes(1);
    expect(String(warn.mock.calls[0][0])).toContain('"swagger-plugin-response" is off');
  });
});
