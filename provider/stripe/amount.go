package stripe

import (
	"fmt"
	"strings"

	"chargeonce/payment"
)

// chargeonce amounts are integers in the minor units of ISO 4217. Stripe's
// amounts are integers in its own unit for each currency, which is ISO's for
// almost every currency, and not for these (https://docs.stripe.com/currencies,
// "Zero-decimal currencies" and "Special cases"):
//
//   - ISK and UGX have no minor unit in ISO 4217, but Stripe keeps them as
//     two-decimal currencies for backwards compatibility, with amounts that
//     must be multiples of 100: ISK 500 is a Stripe amount of 50000. Exact.
//     (Stripe also lists UGX among its zero-decimal currencies; its special
//     case, which says otherwise, is what is followed here. A test account
//     settles it: it refuses a UGX amount that is not a multiple of 100.)
//   - MGA has two minor units in ISO 4217, but Stripe treats it as a
//     zero-decimal currency: 19900 (MGA 199.00) is 199, and 19999 (MGA
//     199.99) cannot be charged.
//   - BHD, JOD, KWD, OMR and TND have three minor units in both, but Stripe
//     wants the last digit to be 0: 1230 (KWD 1.230) is fine, 1234 cannot
//     be charged. Other three-decimal ISO currencies (IQD, LYD) are not
//     Stripe presentment currencies; they are refused rather than guessed.
//   - HUF and TWD are two-decimal in both for charges; only Stripe's payouts
//     want whole units, which is no concern of a charge.
//
// An amount that Stripe cannot take exactly is refused, never rounded.
var (
	// stripeTwoDecimal are zero-decimal in ISO 4217, two-decimal at Stripe.
	stripeTwoDecimal = map[string]bool{"ISK": true, "UGX": true}
	// stripeZeroDecimal are two-decimal in ISO 4217, zero-decimal at Stripe.
	stripeZeroDecimal = map[string]bool{"MGA": true}
	// stripeThreeDecimal take three decimals at Stripe, the last one 0.
	stripeThreeDecimal = map[string]bool{"BHD": true, "JOD": true, "KWD": true, "OMR": true, "TND": true}
)

// Failure codes of amounts Stripe cannot take.
const (
	CodeAmountNotSupported   = "amount_not_supported"
	CodeCurrencyNotSupported = "currency_not_supported"
)

// stripeAmount converts amount, in the ISO 4217 minor units of currency,
// to Stripe's unit for currency. When Stripe cannot charge it exactly, ok is
// false and refusal says why, for the shopper; nothing is sent.
func stripeAmount(amount int64, currency string) (converted int64, refusal payment.ProviderCharge, ok bool) {
	digits, known := payment.MinorUnits(currency)
	switch {
	case stripeTwoDecimal[currency]:
		return amount * 100, payment.ProviderCharge{}, true
	case stripeZeroDecimal[currency]:
		if amount%100 != 0 {
			return 0, refuse(CodeAmountNotSupported, fmt.Sprintf(
				"This card provider charges %s in whole units only; %s %s cannot be charged. The card was not charged.",
				currency, decimal(amount, digits), currency)), false
		}
		return amount / 100, payment.ProviderCharge{}, true
	case stripeThreeDecimal[currency]:
		if amount%10 != 0 {
			return 0, refuse(CodeAmountNotSupported, fmt.Sprintf(
				"This card provider charges %s in multiples of 0.010 only; %s %s cannot be charged. The card was not charged.",
				currency, decimal(amount, digits), currency)), false
		}
		return amount, payment.ProviderCharge{}, true
	case known && digits == 3:
		return 0, refuse(CodeCurrencyNotSupported, fmt.Sprintf(
			"This card provider does not charge in %s. The card was not charged.", currency)), false
	}
	return amount, payment.ProviderCharge{}, true
}

func refuse(code, message string) payment.ProviderCharge {
	return payment.ProviderCharge{FailureCode: code, FailureMessage: message}
}

// decimal writes amount, in minor units with digits decimals, as a decimal
// number: 1234 with 3 digits is 1.234.
func decimal(amount int64, digits int) string {
	if digits == 0 {
		return fmt.Sprint(amount)
	}
	s := fmt.Sprintf("%0*d", digits+1, amount)
	return s[:len(s)-digits] + "." + s[len(s)-digits:]
}

// chargeonceAmount converts amount, in Stripe's unit for currency, to the
// ISO 4217 minor units of currency: the inverse of stripeAmount.
func chargeonceAmount(amount int64, currency string) int64 {
	switch {
	case stripeTwoDecimal[currency]:
		return amount / 100
	case stripeZeroDecimal[currency]:
		return amount * 100
	}
	return amount
}

// currencyParam is the currency as Stripe wants it: lower case.
func currencyParam(currency string) string { return strings.ToLower(currency) }
