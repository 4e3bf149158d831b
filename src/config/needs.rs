//! What a command needs of the environment: `serve` every `${VAR}` and every caller's key;
//! `check` and `init` only those of the parts they use, so that an operator can scaffold or
//! check one upstream on a machine that holds none of the callers' keys or the databases'
//! passwords.

use std::path::Path;

use super::Config;
use super::yaml::{self, LoadError, Unresolved, is_under};

/// The command a configuration is loaded for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Needs {
    /// `serve`: everything.
    Serve,
    /// `check`: the contracts, callers, approvers and roles, and (unless offline) how to reach
    /// the upstreams; not what only a running gateway uses (listening, receipts, state,
    /// telemetry, token validation) nor callers' keys.
    Check { offline: bool },
    /// `stdio`: what `serve` needs but listening, and of the callers' keys only the one it
    /// is given.
    Stdio,
    /// `init --upstream NAME`: that upstream only.
    Upstream(String),
    /// These keys only (`receipts`: the database; `approvals`: where the gateway listens).
    Parts(&'static [&'static str]),
}

/// Keys only a running gateway reads: `check` leaves their unset variables alone.
const SERVE_ONLY: &[&str] = &[
    "listen",
    "path",
    "public_url",
    "allowed_hosts",
    "allowed_origins",
    "receipts",
    "state",
    "telemetry",
    "replica_url",
    "http",
    "oauth.issuer",
    "oauth.audience",
    "oauth.jwks_url",
    "oauth.authorization_servers",
];

/// Keys only a gateway that listens reads: a stdio gateway leaves their unset variables alone.
const LISTEN_ONLY: &[&str] = &[
    "listen",
    "path",
    "public_url",
    "allowed_hosts",
    "allowed_origins",
    "replica_url",
    "http",
];

impl Needs {
    /// Whether an unset `${VAR}` under `key` (dotted) can be left for this command.
    pub fn may_leave(&self, key: &str) -> bool {
        match self {
            Needs::Serve => false,
            Needs::Check { offline } => {
                SERVE_ONLY.iter().any(|k| is_under(key, k))
                    || (*offline && is_under(key, "upstreams"))
            }
            Needs::Stdio => LISTEN_ONLY.iter().any(|k| is_under(key, k)),
            Needs::Upstream(name) => !is_under(key, &format!("upstreams.{name}")),
            Needs::Parts(parts) => !parts.iter().any(|part| is_under(key, part)),
        }
    }

    /// Whether callers' `api_key_env` variables must be set.
    fn needs_keys(&self) -> bool {
        *self == Needs::Serve
    }
}

/// Whether the environment variable `var` holds a key (set and not empty).
pub fn key_is_set(var: &str) -> bool {
    std::env::var(var).is_ok_and(|v| !v.is_empty())
}

impl Config {
    /// Loads the configuration at `path` for `needs`: every problem found (not only the first),
    /// and none about a variable the command does not need, which stays in `unresolved`.
    pub fn load_for(path: &Path, needs: &Needs) -> Result<Config, Vec<LoadError>> {
        let text = std::fs::read_to_string(path).map_err(|source| {
            vec![LoadError::Read {
                path: path.to_path_buf(),
                source,
            }]
        })?;
        let (mut config, unresolved): (Config, Vec<Unresolved>) =
            yaml::parse_leaving(path, &text, &|key| needs.may_leave(key)).map_err(|e| vec![e])?;
        config.settle(path);
        // A value still holding its `${VAR}` is not judged: it is not this command's.
        let problems: Vec<LoadError> = config
            .problems(needs.needs_keys())
            .into_iter()
            .filter(|p| match p {
                LoadError::Invalid { key, .. } => !unresolved.iter().any(|u| is_under(key, &u.key)),
                _ => true,
            })
            .collect();
        if !problems.is_empty() {
            return Err(problems);
        }
        config.unresolved = unresolved;
        Ok(config)
    }

    /// The callers whose `api_key_env` variable is unset (`serve` refuses to start without them).
    pub fn callers_without_keys(&self) -> Vec<(&str, &str)> {
        self.callers
            .iter()
            .filter_map(|c| {
                let var = c.api_key_env.as_deref()?;
                (!key_is_set(var)).then_some((c.name.as_str(), var))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(text: &str) -> (tempfile::TempDir, std::path::PathBuf) {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("narrowgate.yaml");
        std::fs::write(&path, text).expect("write");
        (dir, path)
    }

    const CONFIG: &str = "upstreams:
  git:
    command: uvx
    args: [mcp-server-git, --repository, \"${NG_NEEDS_TEST_REPO}\"]
  weather:
    url: http://127.0.0.1:1/mcp
    headers: { Authorization: \"Bearer ${NG_NEEDS_TEST_WEATHER_TOKEN}\" }
callers:
  - name: ci-bot
    api_key_env: NG_NEEDS_TEST_CI_KEY
    tools: [\"*\"]
receipts:
  url: \"postgres://gw:${NG_NEEDS_TEST_PG_PASSWORD}@db/gw\"
state: \"${NG_NEEDS_TEST_REDIS_URL}\"
";

    /// Proves: `init --upstream git` loads without the caller's key, the other upstream's
    /// token, the database password or the Redis URL (left, and listed as such), but not
    /// without a variable of git's own; `serve` needs every one.
    #[test]
    fn init_needs_only_its_upstreams_environment() {
        let (_dir, path) = write(CONFIG);
        let init = Needs::Upstream("git".into());
        let errors = Config::load_for(&path, &init).expect_err("git's variable is unset");
        assert_eq!(errors.len(), 1, "{errors:?}");
        let text = errors[0].to_string();
        assert!(
            text.contains("upstreams.git.args.2") && text.contains("NG_NEEDS_TEST_REPO"),
            "{text}"
        );
        let (_dir, path) = write(&CONFIG.replace("${NG_NEEDS_TEST_REPO}", "/srv/repo"));
        let config = Config::load_for(&path, &init).expect("init loads");
        assert_eq!(config.upstreams["git"].args[2], "/srv/repo");
        let left: Vec<&str> = config.unresolved.iter().map(|u| u.key.as_str()).collect();
        assert_eq!(
            left,
            [
                "receipts.url",
                "state",
                "upstreams.weather.headers.Authorization"
            ]
        );
        let serve = Config::load(&path).expect_err("serve needs everything");
        assert!(serve.to_string().contains("NG_NEEDS_TEST"), "{serve}");
    }

    /// Proves: `check` needs neither callers' keys nor what only a running gateway reads
    /// (receipts, state), but online it needs the upstreams' variables, offline not.
    #[test]
    fn check_needs_the_upstreams_only_online() {
        let (_dir, path) = write(&CONFIG.replace("${NG_NEEDS_TEST_REPO}", "/srv/repo"));
        let online = Config::load_for(&path, &Needs::Check { offline: false })
            .expect_err("the weather token is unset");
        assert_eq!(online.len(), 1, "{online:?}");
        assert!(
            online[0]
                .to_string()
                .contains("NG_NEEDS_TEST_WEATHER_TOKEN"),
            "{:?}",
            online
        );
        let offline =
            Config::load_for(&path, &Needs::Check { offline: true }).expect("offline loads");
        assert_eq!(
            offline.callers_without_keys(),
            [("ci-bot", "NG_NEEDS_TEST_CI_KEY")]
        );
    }

    /// Proves: a value left holding its `${VAR}` is not judged, but a problem next to it (a
    /// misspelt key of the same upstream) is still reported as itself, not as the variable.
    #[test]
    fn only_the_left_value_is_spared() {
        let (_dir, path) =
            write("upstreams:\n  weather:\n    url: \"${NG_NEEDS_TEST_URL}\"\n    timout: 5s\n");
        let errors =
            Config::load_for(&path, &Needs::Check { offline: true }).expect_err("the misspelt key");
        assert!(
            errors[0].to_string().contains("unknown field `timout`"),
            "{errors:?}"
        );
        let (_dir, path) = write("upstreams:\n  weather:\n    url: \"${NG_NEEDS_TEST_URL}\"\n");
        let config =
            Config::load_for(&path, &Needs::Check { offline: true }).expect("the URL is left");
        assert_eq!(config.unresolved[0].key, "upstreams.weather.url");
    }

    /// Proves: `receipts` needs only the receipts database's variables, not the callers' keys or
    /// the upstreams' tokens.
    #[test]
    fn receipts_need_only_the_database() {
        let (_dir, path) = write(&CONFIG.replace("${NG_NEEDS_TEST_PG_PASSWORD}", "pw"));
        let config = Config::load_for(&path, &Needs::Parts(&["receipts"])).expect("loads");
        assert_eq!(
            config.receipts.and_then(|r| r.url).as_deref(),
            Some("postgres://gw:pw@db/gw")
        );
        let (_dir, path) = write(CONFIG);
        let errors =
            Config::load_for(&path, &Needs::Parts(&["receipts"])).expect_err("the password");
        assert!(
            errors[0].to_string().contains("NG_NEEDS_TEST_PG_PASSWORD"),
            "{errors:?}"
        );
    }

    /// Proves: every problem of a file is reported at once, not only the first.
    #[test]
    fn every_problem_is_reported() {
        let (_dir, path) = write(
            "listen: nowhere\nstate: sqlite\ncallers:\n  - name: a\n  - name: a\n    anonymous: true\n",
        );
        let errors =
            Config::load_for(&path, &Needs::Check { offline: true }).expect_err("three problems");
        let text: Vec<String> = errors.iter().map(ToString::to_string).collect();
        assert_eq!(errors.len(), 4, "{text:#?}");
    }
}
