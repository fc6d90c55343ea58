//! Durations on the command line (`expire --idle 30d`): whole numbers, each with a unit, one
//! after another (`1h30m`).

use std::time::Duration;

/// The units, longest name first where one name starts another (`ms` before `m`).
const UNITS: [(&str, u64); 6] = [
    ("ms", 1),
    ("s", 1_000),
    ("m", 60_000),
    ("h", 3_600_000),
    ("d", 86_400_000),
    ("w", 604_800_000),
];

const FORMS: &str = "a whole number and a unit: ms, s, m, h, d or w (30d, 12h, 90m, 45s, \
500ms, 1h30m)";

/// Parses `30d`, `12h`, `90m`, `45s`, `500ms`, `2w`, or a sum of them such as `1h30m` (clap's
/// value parser for `--idle`: an error is a usage error, exit 2).
pub fn parse(text: &str) -> Result<Duration, String> {
    if text.is_empty() {
        return Err(format!("an empty duration; expected {FORMS}"));
    }
    let mut rest = text;
    let mut total: u64 = 0;
    while !rest.is_empty() {
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return Err(format!("{text:?} is not a duration; expected {FORMS}"));
        }
        let (number, after) = rest.split_at(digits);
        let letters = after.bytes().take_while(u8::is_ascii_alphabetic).count();
        let (unit, after) = after.split_at(letters);
        if unit.is_empty() && after.starts_with('.') {
            return Err(format!(
                "{text:?}: whole numbers only (1h30m, not 1.5h); expected {FORMS}"
            ));
        }
        if unit.is_empty() {
            return Err(format!(
                "{text:?} has no unit after {number}; expected {FORMS}"
            ));
        }
        let Some(&(_, ms)) = UNITS.iter().find(|(name, _)| *name == unit) else {
            return Err(format!("{text:?}: unknown unit {unit:?}; expected {FORMS}"));
        };
        let too_long = || format!("{text:?} is too long a duration");
        let n: u64 = number.parse().map_err(|_| too_long())?;
        total = n
            .checked_mul(ms)
            .and_then(|part| total.checked_add(part))
            .ok_or_else(too_long)?;
        rest = after;
    }
    Ok(Duration::from_millis(total))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(text: &str) -> u64 {
        parse(text).unwrap().as_millis() as u64
    }

    #[test]
    fn every_unit_and_sums_of_them() {
        assert_eq!(ms("30d"), 30 * 86_400_000);
        assert_eq!(ms("12h"), 12 * 3_600_000);
        assert_eq!(ms("90m"), 90 * 60_000);
        assert_eq!(ms("45s"), 45_000);
        assert_eq!(ms("500ms"), 500);
        assert_eq!(ms("2w"), 14 * 86_400_000);
        assert_eq!(ms("1h30m"), 90 * 60_000);
        assert_eq!(ms("1d12h"), 36 * 3_600_000);
        assert_eq!(ms("1s500ms"), 1_500);
        assert_eq!(ms("0s"), 0);
        assert_eq!(ms("007m"), 7 * 60_000);
    }

    #[test]
    fn anything_else_is_refused_with_the_forms() {
        for bad in [
            "", "30", "d", "30x", "30 d", " 30d", "30d ", "-1d", "1.5h", "30D", "1h30", "1hm",
            "30dd", "+3s", "1_000ms",
        ] {
            let err = parse(bad).unwrap_err();
            assert!(err.contains("30d, 12h"), "{bad:?}: {err}");
        }
        for huge in [
            "99999999999999999999ms",
            "999999999999999999w",
            "18446744073709551615ms1ms",
        ] {
            assert!(parse(huge).unwrap_err().contains("too long"), "{huge}");
        }
    }
}
