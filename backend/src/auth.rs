//! Credentials. A bearer credential names the tenant it acts for and what it may do:
//! API keys from `--token-file` (admin `TOKEN`, or `TENANT:TOKEN`, or
//! `TENANT:sha256:HEX`), and JWTs (`--jwt-secret-file` for HS256, `--jwt-public-key`
//! for RS256/ES256) whose `tenant` claim names the tenant, `exp` and `nbf` are enforced and an
//! optional `scope` (`read`/`write`) limits them. The token file is re-read on SIGHUP.

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde::Deserialize;
use sha2::{Digest, Sha256};

use crate::records::{same_digest, valid_name};

/// What a credential may do.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Scope {
    Read,
    Write,
}

/// A verified credential.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Grant {
    /// `None`: an admin key, acting for any tenant.
    pub tenant: Option<String>,
    pub scope: Scope,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum AuthError {
    #[error("the bearer credential is not valid: {0}")]
    Invalid(String),
}

#[derive(Debug, thiserror::Error)]
#[error("{path}: {reason}")]
pub struct ConfigError {
    path: String,
    reason: String,
}

fn config_error(path: &Path, reason: impl Into<String>) -> ConfigError {
    ConfigError { path: path.display().to_string(), reason: reason.into() }
}

/// One line of the token file: the sha256 of the token and the tenant it acts for.
#[derive(Clone, Debug)]
struct ApiKey {
    sha256: [u8; 32],
    tenant: Option<String>,
}

struct Jwt {
    key: DecodingKey,
    algorithms: Vec<Algorithm>,
}

#[derive(Deserialize)]
struct Claims {
    tenant: String,
    #[serde(default)]
    scope: Option<String>,
}

/// The server's credentials; empty means none are needed (the local default).
pub struct Auth {
    token_file: Option<PathBuf>,
    keys: RwLock<Arc<Vec<ApiKey>>>,
    jwt: Option<Jwt>,
}

impl Auth {
    pub fn load(
        token_file: Option<&Path>,
        jwt_secret_file: Option<&Path>,
        jwt_public_key: Option<&Path>,
    ) -> Result<Self, ConfigError> {
        let keys = match token_file {
            Some(path) => {
                let keys = read_keys(path)?;
                if keys.is_empty() {
                    return Err(config_error(path, "holds no token"));
                }
                keys
            }
            None => Vec::new(),
        };
        let jwt = match (jwt_secret_file, jwt_public_key) {
            (Some(_), Some(_)) => {
                return Err(ConfigError {
                    path: "--jwt-secret-file/--jwt-public-key".into(),
                    reason: "give one of the two".into(),
                })
            }
            (Some(path), None) => {
                let secret = std::fs::read(path).map_err(|e| config_error(path, e.to_string()))?;
                let secret = secret.trim_ascii();
                if secret.len() < 32 {
                    return Err(config_error(path, "an HS256 secret needs at least 32 bytes"));
                }
                Some(Jwt { key: DecodingKey::from_secret(secret), algorithms: vec![Algorithm::HS256] })
            }
            (None, Some(path)) => {
                let pem = std::fs::read(path).map_err(|e| config_error(path, e.to_string()))?;
                let (key, algorithm) = if let Ok(k) = DecodingKey::from_rsa_pem(&pem) {
                    (k, Algorithm::RS256)
                } else if let Ok(k) = DecodingKey::from_ec_pem(&pem) {
                    (k, Algorithm::ES256)
                } else {
                    return Err(config_error(path, "not an RSA or EC public key in PEM"));
                };
                Some(Jwt { key, algorithms: vec![algorithm] })
            }
            (None, None) => None,
        };
        Ok(Auth { token_file: token_file.map(Path::to_path_buf), keys: RwLock::new(Arc::new(keys)), jwt })
    }

    /// Whether requests need credentials at all.
    pub fn configured(&self) -> bool {
        self.jwt.is_some() || !self.keys.read().expect("not poisoned").is_empty()
    }

    /// Re-reads the token file (SIGHUP); on error the old keys stay.
    pub fn reload(&self) -> Result<usize, ConfigError> {
        let Some(path) = &self.token_file else { return Ok(0) };
        let keys = read_keys(path)?;
        if keys.is_empty() {
            return Err(config_error(path, "holds no token; keeping the previous ones"));
        }
        let count = keys.len();
        *self.keys.write().expect("not poisoned") = Arc::new(keys);
        Ok(count)
    }

    /// Checks a bearer credential.
    pub fn verify(&self, bearer: &str) -> Result<Grant, AuthError> {
        // A JWT has three dot-separated parts; an API key is checked against the file.
        if bearer.matches('.').count() == 2 {
            if let Some(jwt) = &self.jwt {
                return verify_jwt(jwt, bearer);
            }
        }
        let given: [u8; 32] = Sha256::digest(bearer.as_bytes()).into();
        let keys = self.keys.read().expect("not poisoned").clone();
        // Every key is compared in full, so timing says nothing about which matched.
        let mut found = None;
        for key in keys.iter() {
            if same_digest(&key.sha256, &given) {
                found = Some(key.tenant.clone());
            }
        }
        match found {
            Some(tenant) => Ok(Grant { tenant, scope: Scope::Write }),
            None => Err(AuthError::Invalid("unknown token".into())),
        }
    }
}

fn verify_jwt(jwt: &Jwt, token: &str) -> Result<Grant, AuthError> {
    let mut validation = Validation::new(jwt.algorithms[0]);
    validation.algorithms = jwt.algorithms.clone();
    validation.set_required_spec_claims(&["exp"]);
    // A token not valid yet is refused as an expired one is (jsonwebtoken skips `nbf` by default).
    validation.validate_nbf = true;
    validation.leeway = 0;
    let data = jsonwebtoken::decode::<Claims>(token, &jwt.key, &validation)
        .map_err(|e| AuthError::Invalid(format!("JWT: {e}")))?;
    let claims = data.claims;
    if !valid_name(&claims.tenant, 64) {
        return Err(AuthError::Invalid("JWT: the tenant claim is not a valid tenant name".into()));
    }
    let scope = match claims.scope.as_deref() {
        None | Some("write") => Scope::Write,
        Some("read") => Scope::Read,
        Some(other) => return Err(AuthError::Invalid(format!("JWT: unknown scope '{other}' (read or write)"))),
    };
    Ok(Grant { tenant: Some(claims.tenant), scope })
}

/// `TOKEN`, `TENANT:TOKEN` or `TENANT:sha256:HEX` per line; `#` comments, blank lines.
fn read_keys(path: &Path) -> Result<Vec<ApiKey>, ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|e| config_error(path, e.to_string()))?;
    let mut keys = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let at = |reason: &str| config_error(path, format!("line {}: {reason}", n + 1));
        let key = match line.split_once(':') {
            None => ApiKey { sha256: Sha256::digest(line.as_bytes()).into(), tenant: None },
            Some((tenant, rest)) => {
                if !valid_name(tenant, 64) {
                    return Err(at("the tenant must be 1-64 letters, digits, '-' or '_'"));
                }
                let sha256 = match rest.strip_prefix("sha256:") {
                    Some(hexed) => {
                        let bytes = hex::decode(hexed).map_err(|_| at("sha256: needs 64 hex digits"))?;
                        bytes.try_into().map_err(|_| at("sha256: needs 64 hex digits"))?
                    }
                    None if rest.is_empty() => return Err(at("empty token")),
                    None => Sha256::digest(rest.as_bytes()).into(),
                };
                ApiKey { sha256, tenant: Some(tenant.to_owned()) }
            }
        };
        keys.push(key);
    }
    Ok(keys)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn auth_with(lines: &str) -> Auth {
        let dir = std::env::temp_dir().join(format!(
            "stacklens-auth-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("tokens");
        std::fs::write(&file, lines).unwrap();
        Auth::load(Some(&file), None, None).unwrap()
    }

    #[test]
    fn token_file_lines() {
        let hashed = hex::encode(Sha256::digest(b"hashed-secret"));
        let auth = auth_with(&format!("# admins\nroot-token\n\nacme:acme-token\nglobex:sha256:{hashed}\n"));
        assert_eq!(auth.verify("root-token"), Ok(Grant { tenant: None, scope: Scope::Write }));
        assert_eq!(auth.verify("acme-token"), Ok(Grant { tenant: Some("acme".into()), scope: Scope::Write }));
        assert_eq!(auth.verify("hashed-secret"), Ok(Grant { tenant: Some("globex".into()), scope: Scope::Write }));
        assert!(auth.verify("acme:acme-token").is_err());
        assert!(auth.verify(&hashed).is_err(), "the hash itself is no credential");
        assert!(auth.verify("").is_err());
    }

    #[test]
    fn bad_token_files_are_refused() {
        let dir = std::env::temp_dir().join(format!("stacklens-auth-bad-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        for (text, says) in [
            ("# nothing\n\n", "holds no token"),
            ("a/b:token\n", "line 1: the tenant"),
            ("acme:sha256:abc\n", "line 1: sha256"),
            ("acme:\n", "line 1: empty token"),
        ] {
            let file = dir.join("tokens");
            std::fs::write(&file, text).unwrap();
            let err = Auth::load(Some(&file), None, None).err().expect(text).to_string();
            assert!(err.contains(says), "{text:?}: {err}");
        }
    }

    #[test]
    fn jwt_claims_and_expiry() {
        use jsonwebtoken::{encode, EncodingKey, Header};
        let secret = b"0123456789abcdef0123456789abcdef";
        let auth = Auth {
            token_file: None,
            keys: RwLock::new(Arc::new(Vec::new())),
            jwt: Some(Jwt { key: DecodingKey::from_secret(secret), algorithms: vec![Algorithm::HS256] }),
        };
        let exp = (std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() + 600) as i64;
        let sign =
            |claims: serde_json::Value| encode(&Header::default(), &claims, &EncodingKey::from_secret(secret)).unwrap();
        let grant = auth.verify(&sign(serde_json::json!({"tenant": "acme", "exp": exp, "scope": "read"}))).unwrap();
        assert_eq!(grant, Grant { tenant: Some("acme".into()), scope: Scope::Read });
        let grant = auth.verify(&sign(serde_json::json!({"tenant": "acme", "exp": exp}))).unwrap();
        assert_eq!(grant.scope, Scope::Write);
        let expired = sign(serde_json::json!({"tenant": "acme", "exp": exp - 1200}));
        assert!(auth.verify(&expired).unwrap_err().to_string().contains("ExpiredSignature"));
        let not_yet = sign(serde_json::json!({"tenant": "acme", "exp": exp, "nbf": exp - 600 + 86_400}));
        assert!(auth.verify(&not_yet).unwrap_err().to_string().contains("ImmatureSignature"));
        let valid_since = sign(serde_json::json!({"tenant": "acme", "exp": exp, "nbf": exp - 1200}));
        assert_eq!(auth.verify(&valid_since).unwrap().tenant.as_deref(), Some("acme"));
        let no_exp = sign(serde_json::json!({"tenant": "acme"}));
        assert!(auth.verify(&no_exp).is_err());
        let bad_tenant = sign(serde_json::json!({"tenant": "../x", "exp": exp}));
        assert!(auth.verify(&bad_tenant).is_err());
        let other_key = encode(
            &Header::default(),
            &serde_json::json!({"tenant": "acme", "exp": exp}),
            &EncodingKey::from_secret(b"another secret of 32 bytes ......"),
        )
        .unwrap();
        assert!(auth.verify(&other_key).is_err());
    }
}
