/** A failed job's error text is storable: NUL removed, length capped, never half a character. */
import { JOB_ERROR_TEXT_MAX_LENGTH, jobErrorText } from '../../lib/phases/jobs/job-error-text';

describe('jobErrorText', () => {
  it('keeps an Error message, and the text of anything else thrown', () => {
    expect(jobErrorText(new Error('boom'))).toBe('boom');
    expect(jobErrorText('plain')).toBe('plain');
    expect(jobErrorText(42)).toBe('42');
  });

  it('removes NUL characters, which PostgreSQL text refuses', () => {
    expect(jobErrorText(new Error('a\u0000b\u0000'))).toBe('ab');
  });

  it('caps the length, without splitting a surrogate pair', () => {
    expect(jobErrorText('x'.repeat(10_000))).toBe(`${'x'.repeat(1_999)}…`);
    const text = jobErrorText(`${'x'.repeat(1_998)}😀tail`);
    expect(text).toHaveLength(JOB_ERROR_TEXT_MAX_LENGTH - 1);
    expect(text).toBe(`${'x'.repeat(1_998)}…`);
    expect(jobErrorText('y'.repeat(JOB_ERROR_TEXT_MAX_LENGTH))).toHaveLength(2_000);
  });

  it('survives a thrown value that cannot be turned into text', () => {
    const hostile = {
      toString() {
        throw new Error('no');
      },
    };
    expect(jobErrorText(hostile)).toMatch(/cannot be shown/);
  });
});
