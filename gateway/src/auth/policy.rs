//! The bucket policy (`--auth-policy`, spec/08): who owns each bucket and
//! which buckets anyone may read, reloaded as a `Watched` file.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use anyhow::Context;
use serde::Deserialize;
use ursula_stream::BucketId;

/// Who a validated token speaks for: its issuer and subject.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct Principal {
    pub issuer: String,
    pub subject: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PolicyFile {
    #[serde(default)]
    bucket: Vec<BucketEntry>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct BucketEntry {
    id: String,
    #[serde(default)]
    public_read: bool,
    #[serde(default)]
    owners: Vec<Principal>,
}

/// One bucket's rules.
#[derive(Debug, Default)]
pub struct BucketPolicy {
    /// Anyone may read, head, tail and read snapshots; never write.
    pub public_read: bool,
    pub owners: HashSet<Principal>,
}

/// Every bucket the gateway serves; any other is concealed.
#[derive(Debug, Default)]
pub struct Policy {
    buckets: HashMap<String, BucketPolicy>,
}

impl Policy {
    /// A policy file's text, checked: the error names the problem.
    pub fn parse(text: &str) -> anyhow::Result<Policy> {
        let file: PolicyFile = toml::from_str(text).map_err(|e| anyhow::anyhow!("{}", e.message()))?;
        let mut buckets = HashMap::new();
        for entry in file.bucket {
            BucketId::parse(&entry.id).map_err(|e| anyhow::anyhow!("bucket {:?}: {e}", entry.id))?;
            for owner in &entry.owners {
                anyhow::ensure!(
                    !owner.issuer.is_empty() && !owner.subject.is_empty(),
                    "bucket {:?}: an owner needs a non-empty issuer and subject",
                    entry.id
                );
            }
            let policy = BucketPolicy { public_read: entry.public_read, owners: entry.owners.into_iter().collect() };
            anyhow::ensure!(
                buckets.insert(entry.id.clone(), policy).is_none(),
                "bucket {:?} is listed twice",
                entry.id
            );
        }
        Ok(Policy { buckets })
    }

    pub fn load(path: &Path) -> anyhow::Result<Policy> {
        let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        Policy::parse(&text).with_context(|| format!("{}", path.display()))
    }

    pub fn bucket(&self, id: &str) -> Option<&BucketPolicy> {
        self.buckets.get(id)
    }
}

/// The policy in force, reloaded from its file.
pub type PolicyHolder = crate::watched::Watched<Policy>;

/// Opens the policy file (an invalid one refuses the start).
pub fn open(path: PathBuf) -> anyhow::Result<std::sync::Arc<PolicyHolder>> {
    PolicyHolder::open("access policy", path, Policy::load)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_policy_names_owners_and_public_buckets() {
        let policy = Policy::parse(
            r#"
            [[bucket]]
            id = "tenant-a"
            public_read = true
            owners = [{ issuer = "https://issuer.example", subject = "user-1" }]

            [[bucket]]
            id = "tenant-b"
            "#,
        )
        .expect("a valid policy");
        let a = policy.bucket("tenant-a").expect("tenant-a");
        assert!(a.public_read);
        assert!(a.owners.contains(&Principal { issuer: "https://issuer.example".into(), subject: "user-1".into() }));
        let b = policy.bucket("tenant-b").expect("tenant-b");
        assert!(!b.public_read && b.owners.is_empty());
        assert!(policy.bucket("tenant-c").is_none());
    }

    /// The README's example file is a valid policy.
    #[test]
    fn the_documented_example_is_valid() {
        let policy = Policy::parse(include_str!("../../../policies/access.toml")).expect("policies/access.toml");
        assert!(policy.bucket("tenant-a").is_some_and(|b| b.public_read));
        assert_eq!(policy.bucket("tenant-b").map(|b| b.owners.len()), Some(2));
    }

    #[test]
    fn a_bad_policy_is_refused_with_its_problem_named() {
        for (text, names) in [
            ("[[bucket]]\nid = \"tenant-a\"\npublik_read = true\n", "publik_read"),
            ("[[bucket]]\nid = \"Tenant\"\n", "Tenant"),
            ("[[bucket]]\nid = \"tenant-a\"\n[[bucket]]\nid = \"tenant-a\"\n", "twice"),
            ("[[bucket]]\nid = \"tenant-a\"\nowners = [{ issuer = \"i\" }]\n", "subject"),
            ("[[bucket]]\nid = \"tenant-a\"\nowners = [{ issuer = \"\", subject = \"s\" }]\n", "non-empty"),
            ("[tenants]\n", "tenants"),
        ] {
            let e = Policy::parse(text).expect_err(text);
            assert!(format!("{e:#}").contains(names), "{text}: {e:#}");
        }
    }
}
