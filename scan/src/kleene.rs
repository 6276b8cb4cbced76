//! Kleene booleans as polars computes them: `K` is a boolean column's cell (None: null), and `and` / `or` / `not` are
//! polars' `&`, `|` and `~` on them. The passes that replaced polars expressions (records, the openai attempts' requests)
//! follow those expressions' nulls with these.

pub type K = Option<bool>;

pub fn and(a: K, b: K) -> K {
    match (a, b) {
        (Some(false), _) | (_, Some(false)) => Some(false),
        (Some(true), Some(true)) => Some(true),
        _ => None,
    }
}

pub fn or(a: K, b: K) -> K {
    match (a, b) {
        (Some(true), _) | (_, Some(true)) => Some(true),
        (Some(false), Some(false)) => Some(false),
        _ => None,
    }
}

pub fn not(a: K) -> K {
    a.map(|x| !x)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn null_is_unknown_as_in_polars() {
        assert_eq!(and(None, Some(false)), Some(false));
        assert_eq!(and(None, Some(true)), None);
        assert_eq!(or(None, Some(true)), Some(true));
        assert_eq!(or(None, Some(false)), None);
        assert_eq!(not(None), None);
        assert_eq!(not(Some(true)), Some(false));
    }
}
