//! Everything that touches the network or a secret: the HTTP client and the
//! credential resolution. Components never get here.

mod aws;
mod client;
mod credentials;

pub use aws::{AwsIdentity, IdentitySource, REGION_ID, SigV4};
pub use client::{BodyStream, HttpClient, TransportError, TransportSettings};
pub use credentials::{Credential, CredentialError, EnvSecretStore, Secret, SecretStore};
