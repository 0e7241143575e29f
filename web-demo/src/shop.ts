// What the demo shop sells and which test cards it offers.

export const cart = {
  amount: 11300,
  currency: 'USD',
  description: 'Trailhead Supply: trail running shoes, merino socks',
} as const;

export interface Card {
  token: string;
  brand: string;
  /** The short brand mark on the card icon. */
  mark: string;
  last4: string;
  behaviour: string;
}

export const cards: readonly Card[] = [
  { token: 'pm_card_visa', brand: 'Visa', mark: 'VISA', last4: '4242', behaviour: 'Succeeds' },
  { token: 'pm_card_chargeDeclined', brand: 'Visa', mark: 'VISA', last4: '0002', behaviour: 'Declined by the bank' },
  { token: 'pm_card_insufficientFunds', brand: 'Mastercard', mark: 'MC', last4: '9995', behaviour: 'Insufficient funds' },
  { token: 'pm_card_slow', brand: 'Mastercard', mark: 'MC', last4: '3220', behaviour: 'Slow bank: processing for a few seconds' },
  { token: 'pm_card_lostResponse', brand: 'Amex', mark: 'AMEX', last4: '0005', behaviour: 'The provider loses its answer' },
  {
    token: 'pm_card_authenticationRequired',
    brand: 'Visa',
    mark: 'VISA',
    last4: '3184',
    behaviour: 'Needs authentication (3-D Secure): you confirm at your bank',
  },
];

export const money = (amount: number, currency: string) =>
  new Intl.NumberFormat('en-US', { style: 'currency', currency }).format(amount / 100);
