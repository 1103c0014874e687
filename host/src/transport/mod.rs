//! Everything that touches the network or a secret: the HTTP client and the
//! credential resolution. Components never get here.

mod aws;
mod client;
mod credentials;
mod scope;
mod secret_cache;
mod token;

pub use aws::{ACCESS_KEY_ID, AwsIdentity, IdentitySource, REGION_ID, RETRY_AFTER_FAILURE, SigV4};
pub(crate) use client::error_chain;
pub use client::{BodyStream, HttpClient, TransportError, TransportSettings};
pub use credentials::{Credential, CredentialError, EnvSecretStore, Secret, SecretStore};
pub use scope::{ConfiguredIds, ScopedSecrets};
pub use secret_cache::{DEFAULT_SECRET_REFRESH, SecretCache};
pub use token::{
    MINT_TIMEOUT, Minted, REFRESH_MARGIN, TokenCredentials, TokenError, TokenSetupError, TokenSource, USABLE_MARGIN,
};
