import {
  getNullableType,
  isListType,
  isObjectType,
  isScalarType,
  isSpecifiedScalarType,
} from 'graphql';
import type { GraphQLOutputType, GraphQLScalarType } from 'graphql';

/** Whether a scalar can serialize this value, as graphql-js would when it answers. */
function serializes(scalar: GraphQLScalarType, value: unknown): boolean {
  try {
    const out = scalar.serialize(value);
    return out !== null && out !== undefined && !Number.isNaN(out);
  } catch {
    return false;
  }
}

/**
 * A stored value of a custom scalar as the scalar serializes it: kept when it does already (a
 * scalar that takes its JSON form), else read back through the scalar's `parseValue` (an ISO
 * string into the `Date` that `DateTime` serializes), else kept as stored.
 */
function reviveScalar(scalar: GraphQLScalarType, value: unknown): unknown {
  if (serializes(scalar, value)) return value;
  try {
    const parsed = scalar.parseValue(value);
    return serializes(scalar, parsed) ? parsed : value;
  } catch {
    return value;
  }
}

/**
 * A replayed result (the resolver's first result, through JSON) made servable again by its
 * GraphQL type: where JSON turned a value into another form (a `Date` into an ISO string), the
 * field's custom scalar reads it back. Objects are followed field by field, lists item by item;
 * built-in scalars and enums keep the stored value (enums store their internal value); under an
 * interface or a union the stored value is kept as it is.
 * @param value - the stored JSON value
 * @param type - the mutation field's return type
 * @internal
 */
export function reviveResult(value: unknown, type: GraphQLOutputType): unknown {
  if (value === null || value === undefined) return value;
  const nullable = getNullableType(type);
  if (isListType(nullable)) {
    const item = nullable.ofType as GraphQLOutputType;
    return Array.isArray(value) ? value.map((entry) => reviveResult(entry, item)) : value;
  }
  if (isObjectType(nullable)) {
    if (typeof value !== 'object') return value;
    const revived: Record<string, unknown> = { ...(value as Record<string, unknown>) };
    for (const [name, field] of Object.entries(nullable.getFields())) {
      if (name in revived) revived[name] = reviveResult(revived[name], field.type);
    }
    return revived;
  }
  if (isScalarType(nullable) && !isSpecifiedScalarType(nullable)) {
    return reviveScalar(nullable, value);
  }
  return value;
}
