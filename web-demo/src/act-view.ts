// What an act of the shop's backend (desk.ts) says as it goes: the note
// under its button and the live region's sentence, in the words of each
// act (refund-view.ts, order-view.ts). Plain data, computed without a DOM.
import type { ActPhase, ActTarget } from './desk';
import { shortKey } from './rowtext';
import { money } from './shop';

export type ActTone = 'neutral' | 'pending' | 'ok' | 'warn' | 'error';

/** An act's button: hidden when the charge allows no such act, busy while one is on its way. */
export interface ButtonView {
  hidden: boolean;
  disabled: boolean;
  busy: boolean;
  label: string;
}

/** The note under an act's button, which also describes it: what it does, or how it went. */
export interface ActNote {
  text: string;
  tone: ActTone;
}

/** How an act speaks of itself. */
export interface ActWords<T> {
  /** refund, capture, void */
  noun: string;
  /** Refund, Ship order, Cancel order: the button that asks for it. */
  button: string;
  /** refund id, capture id, void id */
  idName: string;
  /** Refunding, Capturing, Voiding */
  doing: string;
  /** refunded, captured, voided: nothing was … */
  done: string;
  /** What the act does before it is asked for. */
  offer(amount: string): string;
  /** What it made, in a sentence, and in the live region's few words. */
  made(made: T): { note: string; say: string };
  /** After a failure: what happened, and what the button does now. */
  failed: string;
  /** A refusal that says there is nothing left to act on, if the act has one (REFUND_EXCEEDS_CHARGE with 0 left). */
  exhausted?(p: Extract<ActPhase<T>, { kind: 'refused' }>): { note: string; say: string } | null;
}

const capitalized = (s: string) => s.charAt(0).toUpperCase() + s.slice(1);

export function actNote<T>(w: ActWords<T>, target: ActTarget | null, p: ActPhase<T>): ActNote | null {
  if (!target) return null;
  const amount = money(target.amount, target.currency);
  const idText = (id: string) => `${w.idName} ${shortKey(id)}`;
  switch (p.kind) {
    case 'none':
      return { text: w.offer(amount), tone: 'neutral' };
    case 'sending':
      return { text: `${w.doing} ${amount} under ${idText(p.id)}…`, tone: 'pending' };
    case 'retrying':
      return {
        text:
          p.cause === 'lost'
            ? `The response was lost. Retrying with the same ${idText(p.id)}…`
            : `The shop's backend answered ${p.code}. Retrying with the same ${idText(p.id)}…`,
        tone: 'warn',
      };
    case 'processing':
      return { text: `PROCESSING: the provider has not confirmed the ${w.noun} yet. The page asks again with the same ${idText(p.id)}.`, tone: 'pending' };
    case 'succeeded': {
      const replay = p.replayed
        ? p.lost
          ? ` replayed: true: the answer that was lost carried this ${w.noun}, and the retry with the same id got it back, not a second one.`
          : ` replayed: true: the stored ${w.noun} of an earlier request with the same id.`
        : '';
      return { text: `${w.made(p.made).note}${replay}`, tone: 'ok' };
    }
    case 'failed':
      return { text: `The ${w.noun} failed: ${p.failure.message} (${p.failure.code}). ${w.failed}`, tone: 'error' };
    case 'refused': {
      const none = w.exhausted?.(p);
      if (none) return { text: none.note, tone: 'neutral' };
      return { text: `The shop's backend refused the ${w.noun}: ${p.message} (${p.code}). Nothing was ${w.done}.`, tone: 'error' };
    }
    case 'unknown':
      return {
        text: `${p.code ? `The shop's backend answered ${p.code} to the last of ${p.tries} tries` : `No answer after ${p.tries} tries`}: the ${
          w.noun
        } may or may not have been made. ${w.button} sends the same ${idText(p.id)} again, so it cannot ${w.noun} twice.`,
        tone: 'warn',
      };
  }
}

/** The live region's sentence about the act, or null while there is none to say. */
export function actAnnouncement<T>(w: ActWords<T>, target: ActTarget | null, p: ActPhase<T>): string | null {
  if (!target) return null;
  const Noun = capitalized(w.noun);
  switch (p.kind) {
    case 'none':
      return null;
    case 'sending':
      return `${w.doing}.`;
    case 'retrying':
      return p.cause === 'lost'
        ? `The ${w.noun}'s response was lost. Retrying with the same ${w.idName}.`
        : `The shop is busy. Retrying the ${w.noun} with the same ${w.idName}.`;
    case 'processing':
      return `${Noun} processing.`;
    case 'succeeded':
      return w.made(p.made).say;
    case 'failed':
      return `${Noun} failed: ${p.failure.message}`;
    case 'refused':
      return w.exhausted?.(p)?.say ?? `${Noun} refused: ${p.code}.`;
    case 'unknown':
      return `${Noun} not confirmed. ${w.button} sends the same ${w.idName} again.`;
  }
}
