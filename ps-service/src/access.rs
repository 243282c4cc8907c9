//! [`Access`]: what a request's token lets it name. The service token (`--token-file`) names
//! anything; a token of `--namespace-tokens` only matrices, counters and models of its
//! namespaces (`NAMESPACE/name`), so one team cannot drop, overwrite or pull another team's
//! model, and does not see it in the map or the status. [`crate::auth::AuthLayer`] attaches it
//! to each request it lets through.

use std::collections::HashSet;
use std::fmt;
use std::path::Path;
use std::sync::Arc;

use angel_proto::credential::Token;
use angel_proto::{PartitionMap, PsError, Result, StatusReply, namespace};
use tonic::{Request, Status};

/// What a namespace token learns of a recovery's error, which names the matrices of every
/// namespace.
const HIDDEN: &str = "some of the server's partitions are lost or not restored yet (the status \
                      with the service token names them)";

/// What a request may name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Access {
    /// Anything: the service token, or a service without one.
    All,
    /// Names in these namespaces only.
    Namespaces(Arc<[String]>),
}

impl Access {
    /// The access [`crate::auth::AuthLayer`] gave `request` (all, when the node checks no
    /// token).
    pub fn of<T>(request: &Request<T>) -> Access {
        request
            .extensions()
            .get::<Access>()
            .cloned()
            .unwrap_or(Access::All)
    }

    /// PERMISSION_DENIED unless `name` (of a `what`: matrix, counter, model) is in one of the
    /// namespaces; the message says which ones the token has.
    pub fn check(&self, what: &str, name: &str) -> Result<()> {
        let Access::Namespaces(allowed) = self else {
            return Ok(());
        };
        let (namespace, _) = namespace::split(name);
        if namespace.is_some_and(|ns| allowed.iter().any(|a| a == ns)) {
            return Ok(());
        }
        Err(PsError::PermissionDenied(format!(
            "this token is limited to namespace {}: it may not use {what} '{name}' (run the job \
             with --namespace {}, or name it {}/...)",
            allowed.join(", "),
            allowed[0],
            allowed[0]
        )))
    }

    /// Keeps only the matrices and counters this access may name.
    pub fn filter_map(&self, map: &mut PartitionMap) {
        if *self != Access::All {
            map.matrices
                .retain(|m| self.check("matrix", &m.name).is_ok());
            map.counters
                .retain(|c| self.check("counter", &c.name).is_ok());
        }
    }

    /// Keeps only what concerns the matrices, counters and models this access may name: a
    /// team sees its own models' curves, sizes and traffic, and the servers.
    pub fn filter_status(&self, status: &mut StatusReply) {
        let Access::Namespaces(namespaces) = self else {
            return;
        };
        status.namespaces = namespaces.to_vec();
        let map = status.map.get_or_insert_with(Default::default);
        self.filter_map(map);
        let matrices = map.matrices.iter().map(|m| m.id);
        let spaces = map
            .counters
            .iter()
            .flat_map(|c| [Some(c.id), c.space.as_ref().map(|s| s.id)]);
        let visible: HashSet<u32> = matrices.chain(spaces.flatten()).collect();
        for server in &mut status.servers {
            server.partitions.retain(|p| visible.contains(&p.matrix_id));
            server.pushes.retain(|p| visible.contains(&p.matrix_id));
            server.pulls.retain(|p| visible.contains(&p.matrix_id));
        }
        status
            .workers
            .retain(|w| self.check("model", &w.model).is_ok());
        status
            .epochs
            .retain(|e| self.check("model", &e.model).is_ok());
        status
            .leases
            .retain(|l| self.check("model", &l.model).is_ok());
        // A recovery's error names matrices of every namespace: a team learns only that there
        // is one.
        for r in status.recoveries.iter_mut() {
            let ours = |ns: &String| self.check("matrix", &format!("{ns}/")).is_ok();
            r.namespaces.retain(ours);
            r.by_namespace.retain(|t| ours(&t.namespace));
            r.changes_replayed = r.by_namespace.iter().map(|t| t.replayed).sum();
            r.changes_lost = r.by_namespace.iter().map(|t| t.lost).sum();
            if !r.error.is_empty() {
                r.error = HIDDEN.into();
            }
        }
    }

    /// `e`, a recovery's error, as this access may see it: a restore's or a loss's reason
    /// names the matrices of every namespace, so a namespace token learns only which it is.
    pub fn filter_error(&self, e: PsError) -> PsError {
        match (self, e) {
            (Access::All, e) => e,
            (_, PsError::Unavailable(_)) => PsError::Unavailable(HIDDEN.into()),
            (_, PsError::DataLoss(_)) => PsError::DataLoss(HIDDEN.into()),
            (_, e) => e,
        }
    }

    /// [`Access::check`] as the status a handler returns.
    pub fn allows<T>(
        request: &Request<T>,
        what: &str,
        name: &str,
    ) -> std::result::Result<(), Status> {
        Self::of(request).check(what, name).map_err(Status::from)
    }

    /// PERMISSION_DENIED unless this is the service token: `what` concerns the whole service.
    pub fn require_all<T>(request: &Request<T>, what: &str) -> std::result::Result<(), Status> {
        match Self::of(request) {
            Access::All => Ok(()),
            Access::Namespaces(_) => Err(Status::from(PsError::PermissionDenied(format!(
                "{what} needs the service token; this one is limited to namespaces"
            )))),
        }
    }
}

/// Tokens limited to namespaces, from `--namespace-tokens FILE`: one per line,
/// `NAMESPACE[,NAMESPACE...] TOKEN`; blank lines and lines starting with `#` are skipped.
#[derive(Clone, Default)]
pub struct NamespaceTokens(Vec<(Token, Arc<[String]>)>);

impl fmt::Debug for NamespaceTokens {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let namespaces: Vec<_> = self.0.iter().map(|(_, ns)| ns).collect();
        write!(f, "NamespaceTokens({namespaces:?})")
    }
}

impl NamespaceTokens {
    /// The tokens in the file at `path`; an error names the file and line.
    pub fn from_file(path: &Path) -> Result<Self> {
        let text = angel_proto::config_file::read_text(path, "--namespace-tokens")?;
        Self::parse(&text, &path.display().to_string())
    }

    /// The tokens in `text` (`source` names it in errors).
    pub fn parse(text: &str, source: &str) -> Result<Self> {
        let mut tokens = Vec::new();
        for (n, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let at = format!("--namespace-tokens {source}, line {}", n + 1);
            let Some((namespaces, token)) = line.split_once(char::is_whitespace) else {
                return Err(PsError::InvalidArgument(format!(
                    "{at}: give NAMESPACE[,NAMESPACE...] then the token"
                )));
            };
            // Errors never echo a field: a line written the wrong way round holds a token first.
            let namespaces: Vec<String> = namespaces.split(',').map(str::to_string).collect();
            for (i, ns) in namespaces.iter().enumerate() {
                namespace::check(ns, &format!("{at}, namespace {}", i + 1))?;
            }
            let token = Token::new(token, &at)?;
            if tokens.iter().any(|(t, _)| *t == token) {
                return Err(PsError::InvalidArgument(format!(
                    "{at}: the same token as an earlier line; give each its own"
                )));
            }
            tokens.push((token, namespaces.into()));
        }
        Ok(NamespaceTokens(tokens))
    }

    /// The namespaces of the token `header` (an `authorization` value) carries, if it is one
    /// of these.
    pub fn find(&self, header: &[u8]) -> Option<Access> {
        self.0
            .iter()
            .find(|(token, _)| token.accepts(header))
            .map(|(_, namespaces)| Access::Namespaces(namespaces.clone()))
    }

    /// Whether `token` is one of these.
    pub fn contains(&self, token: &Token) -> bool {
        self.0.iter().any(|(t, _)| t == token)
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TOKEN: &str = "0123456789abcdef0123456789abcdef";

    #[test]
    fn a_limited_token_names_only_its_namespaces() {
        let tokens =
            NamespaceTokens::parse(&format!("# teams\n\nteam-a,shared {TOKEN}\n"), "t").unwrap();
        let access = tokens.find(format!("Bearer {TOKEN}").as_bytes()).unwrap();
        assert!(access.check("matrix", "team-a/m").is_ok());
        assert!(access.check("matrix", "shared/m").is_ok());
        for name in ["team-b/m", "m", "team-ab/m"] {
            let err = access.check("matrix", name).unwrap_err().to_string();
            assert!(err.contains(name) && err.contains("team-a"), "{err}");
        }
        assert!(Access::All.check("matrix", "m").is_ok());
        assert!(tokens.find(b"Bearer another").is_none());
    }

    #[test]
    fn bad_lines_name_the_file_and_line() {
        for (text, words) in [
            ("team-a", "line 1"),
            ("\nteam a/b 0123", "line 2"),
            (&format!("team/a {TOKEN}") as &str, "namespace 1"),
            (&format!("a {TOKEN}\nb {TOKEN}") as &str, "line 2"),
            ("team-a short", "32 to 1024"),
        ] {
            let err = NamespaceTokens::parse(text, "tokens.txt")
                .err()
                .unwrap_or_else(|| panic!("{text} was accepted"))
                .to_string();
            assert!(
                err.contains(words) && err.contains("tokens.txt"),
                "{text}: {err}"
            );
        }
    }
}
