import { describe, expect, it } from 'vitest';
import { AbortError, AttemptOpenError, ChargeRejectedError, ChargerStateError, UnknownOutcomeError } from '../src/index.js';

describe('typed errors', () => {
  it('carry the key, the code and the field', () => {
    const e = new ChargeRejectedError('k1', 'BAD_USER_INPUT', 'amount must be an integer', 'amount');
    expect(e).toBeInstanceOf(ChargeRejectedError);
    expect(e).toBeInstanceOf(Error);
    expect(e).toMatchObject({ name: 'ChargeRejectedError', key: 'k1', code: 'BAD_USER_INPUT', field: 'amount', message: 'amount must be an integer' });
  });

  it('UnknownOutcomeError says resume() is safe', () => {
    const e = new UnknownOutcomeError('k2', '2026-01-01T00:00:00Z');
    expect(e).toMatchObject({ name: 'UnknownOutcomeError', key: 'k2', expiresAt: '2026-01-01T00:00:00Z' });
    expect(e.message).toMatch(/resume\(\)/);
  });

  it('AttemptOpenError names the open key; AbortError is named AbortError', () => {
    expect(new AttemptOpenError('k3')).toMatchObject({ name: 'AttemptOpenError', key: 'k3' });
    expect(new AttemptOpenError('k3').message).toContain('k3');
    expect(new AbortError('k4')).toMatchObject({ name: 'AbortError', key: 'k4' });
    expect(new ChargerStateError('unknown', 'no')).toMatchObject({ name: 'ChargerStateError', state: 'unknown' });
  });
});
