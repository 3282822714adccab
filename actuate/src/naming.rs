//! NodeClaim names. A launch's name is a stable hash of what the NodeClaim is, so an identical
//! NodeClaim needed again later gets the same name; each executed launch is a new NodeClaim, so
//! it takes the first of `name`, `name-2`, `name-3`, … that no NodeClaim has. Uniqueness comes
//! from the NodeClaims that exist (listed from the `Cluster`), not from memory, so it survives a
//! restart.

/// The first of `base`, `base-2`, `base-3`, … for which `taken` is false.
pub fn unique_nodeclaim_name(base: &str, taken: impl Fn(&str) -> bool) -> String {
    if !taken(base) {
        return base.to_string();
    }
    let mut n = 2u64;
    loop {
        let candidate = format!("{base}-{n}");
        if !taken(&candidate) {
            return candidate;
        }
        n += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_in_use_gets_the_first_free_suffix() {
        let existing = ["a", "a-2", "a-4"];
        let taken = |n: &str| existing.contains(&n);
        assert_eq!(unique_nodeclaim_name("b", taken), "b");
        assert_eq!(unique_nodeclaim_name("a", taken), "a-3");
    }
}
