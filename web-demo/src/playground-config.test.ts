import { describe, expect, it } from 'vitest';
import { headersText, readPlaygroundConfig } from './playground-config';

describe('readPlaygroundConfig', () => {
  it('reads the endpoint and the headers the server filled in', () => {
    expect(readPlaygroundConfig('{"endpoint":"/graphql","headers":{"Authorization":"Bearer demo-key"}}')).toEqual({
      endpoint: '/graphql',
      headers: { Authorization: 'Bearer demo-key' },
    });
  });

  it.each([
    ['the unfilled page', '{}'],
    ['nothing', undefined],
    ['not JSON', '{'],
    ['not an object', '"x"'],
    ['wrong types', '{"endpoint":7,"headers":"Authorization"}'],
  ])('falls back to /graphql and no headers for %s', (_, text) => {
    expect(readPlaygroundConfig(text)).toEqual({ endpoint: '/graphql', headers: {} });
  });

  it('keeps only string headers', () => {
    expect(readPlaygroundConfig('{"headers":{"A":"1","B":2}}').headers).toEqual({ A: '1' });
  });
});

describe('headersText', () => {
  it('is the JSON the headers editor shows, or nothing', () => {
    expect(headersText({ Authorization: 'Bearer demo-key' })).toBe('{\n  "Authorization": "Bearer demo-key"\n}');
    expect(headersText({})).toBe('');
  });
});
