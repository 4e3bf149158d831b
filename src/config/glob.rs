//! Glob patterns over tool names, resource URIs and prompt names: `*` matches any run of characters, `?` exactly one.

/// Whether `name` matches `pattern` as a whole.
pub fn glob_match(pattern: &str, name: &str) -> bool {
    let (p, n): (Vec<char>, Vec<char>) = (pattern.chars().collect(), name.chars().collect());
    // Iterative matcher with one backtrack point for the last `*`: linear for tool-name sizes.
    let (mut pi, mut ni) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ni < n.len() {
        match p.get(pi) {
            Some('*') => {
                star = Some((pi, ni));
                pi += 1;
            }
            Some(&c) if c == '?' || c == n[ni] => {
                pi += 1;
                ni += 1;
            }
            _ => match star {
                Some((sp, sn)) => {
                    pi = sp + 1;
                    ni = sn + 1;
                    star = Some((sp, sn + 1));
                }
                None => return false,
            },
        }
    }
    p[pi..].iter().all(|c| *c == '*')
}

#[cfg(test)]
mod tests {
    use super::glob_match;

    #[test]
    fn stars_and_question_marks() {
        assert!(glob_match("*", "anything"));
        assert!(glob_match("*", ""));
        assert!(glob_match("read_*", "read_file"));
        assert!(glob_match("*_file", "read_file"));
        assert!(glob_match("r?ad_*e", "read_file"));
        assert!(glob_match("a*b*c", "aXXbYYc"));
        assert!(!glob_match("read_*", "write_file"));
        assert!(!glob_match("get_weather", "get_weather2"));
        assert!(!glob_match("a*b", "aXbY"));
    }
}
