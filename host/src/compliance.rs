//! Data retention: which retention project a request is bound to, and the
//! application's compliance envelope that decides whether a model served only
//! under provider data sharing may be called at all.
//!
//! Some surfaces (Bedrock's Mantle endpoint) resolve a request's retention mode
//! from a project named in a header. Which project is a deployment fact, like
//! the credential and the base URL, so the host binds it, never the component:
//!
//! - an entry with `requires_lax` (the model is served only under provider data
//!   sharing) goes to the LAX project, and only when the envelope permits data
//!   sharing — otherwise the call is refused before any request exists;
//! - everything else goes to the STRICT project (zero retention, whatever the
//!   account's own setting);
//! - a project that is not configured sends no header and defers to the account.
//!
//! The envelope is checked twice: when the call resolves its target, and again
//! as the last step before the request leaves the process ([`Binding::recheck`]),
//! so no path that skipped the first check can send data-sharing traffic.

use crate::catalog::ModelSpec;
pub use crate::config::{ComplianceEnvelope, RetentionProjects, UNBINDABLE_SURFACES, binds_retention};
use crate::types::HttpRequest;

/// Why the envelope refused a call (the call's error names it as
/// `compliance_refused`): our own words, never a provider's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ComplianceRefusal {
    pub model: String,
    pub reason: String,
}

impl ComplianceEnvelope {
    /// The resolution gate: a model this envelope does not permit is refused
    /// before admission, before encoding, before anything is sent.
    pub fn admit(&self, model: &ModelSpec) -> Result<(), ComplianceRefusal> {
        if model.requires_lax && !self.allow_data_sharing {
            return Err(refusal(model));
        }
        Ok(())
    }
}

fn refusal(model: &ModelSpec) -> ComplianceRefusal {
    ComplianceRefusal {
        model: model.id.clone(),
        reason: "it is served only under provider data sharing (`requires_lax`), and the compliance envelope \
                 does not allow data sharing"
            .to_owned(),
    }
}

/// One call's binding: the projects of its provider, the model and the envelope.
#[derive(Debug, Clone, Copy)]
pub struct Binding<'a> {
    projects: Option<&'a RetentionProjects>,
    model: &'a ModelSpec,
    envelope: ComplianceEnvelope,
}

impl<'a> Binding<'a> {
    pub fn new(projects: Option<&'a RetentionProjects>, model: &'a ModelSpec, envelope: ComplianceEnvelope) -> Self {
        Self { projects, model, envelope }
    }

    /// Adds the project header to an encoded request. A component that set the
    /// header itself produced a request the host will not send.
    pub fn apply(&self, request: &mut HttpRequest) -> Result<(), ComplianceRefusal> {
        let Some(projects) = self.projects else { return Ok(()) };
        if request.headers.iter().any(|(name, _)| name.eq_ignore_ascii_case(&projects.header)) {
            return Err(ComplianceRefusal {
                model: self.model.id.clone(),
                reason: format!("the provider component set `{}`, which only the host binds", projects.header),
            });
        }
        let project = if self.model.requires_lax { &projects.lax_project } else { &projects.strict_project };
        if let Some(project) = project {
            request.headers.push((projects.header.to_ascii_lowercase(), project.clone()));
        }
        Ok(())
    }

    /// The last line before the request leaves the process: a request bound to
    /// the LAX project, or for a model that requires it, goes out only inside
    /// an envelope that allows data sharing.
    pub fn recheck(&self, request: &HttpRequest) -> Result<(), ComplianceRefusal> {
        if self.envelope.allow_data_sharing {
            return Ok(());
        }
        let lax_bound = self.projects.is_some_and(|projects| {
            projects.lax_project.as_ref().is_some_and(|lax| {
                request.headers.iter().any(|(name, value)| name.eq_ignore_ascii_case(&projects.header) && value == lax)
            })
        });
        if self.model.requires_lax || lax_bound {
            return Err(ComplianceRefusal {
                model: self.model.id.clone(),
                reason: "the request is bound to data sharing and the compliance envelope does not allow it \
                         (refused as it was about to be sent)"
                    .to_owned(),
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::HttpRequest;

    fn model(requires_lax: bool) -> ModelSpec {
        ModelSpec { requires_lax, ..ModelSpec::sample() }
    }

    fn projects(strict: Option<&str>, lax: Option<&str>) -> RetentionProjects {
        RetentionProjects {
            header: "anthropic-workspace-id".into(),
            strict_project: strict.map(str::to_owned),
            lax_project: lax.map(str::to_owned),
        }
    }

    fn request() -> HttpRequest {
        HttpRequest {
            method: "POST".into(),
            path_and_query: "/v1/messages".into(),
            headers: Vec::new(),
            body: Vec::new(),
        }
    }

    fn workspace(request: &HttpRequest) -> Option<&str> {
        request.headers.iter().find(|(name, _)| name == "anthropic-workspace-id").map(|(_, value)| value.as_str())
    }

    #[test]
    fn the_default_envelope_refuses_a_data_sharing_model_and_nothing_else() {
        let refusing = ComplianceEnvelope::default();
        let error = crate::error::WeirError::from(refusing.admit(&model(true)).unwrap_err());
        assert_eq!(error.category(), crate::failure::Category::ComplianceRefused);
        assert!(error.to_string().contains("compliance envelope"), "{error}");
        refusing.admit(&model(false)).unwrap();
        ComplianceEnvelope::permitting_data_sharing().admit(&model(true)).unwrap();
    }

    #[test]
    fn ordinary_traffic_binds_the_strict_project() {
        let (projects, model) = (projects(Some("strict"), Some("lax")), model(false));
        let binding = Binding::new(Some(&projects), &model, Default::default());
        let mut request = request();
        binding.apply(&mut request).unwrap();
        binding.recheck(&request).unwrap();
        assert_eq!(workspace(&request), Some("strict"));
    }

    #[test]
    fn a_data_sharing_model_binds_the_lax_project_only_inside_a_permitting_envelope() {
        let permitting = ComplianceEnvelope::permitting_data_sharing();
        let (projects, model) = (projects(Some("strict"), Some("lax")), model(true));
        let binding = Binding::new(Some(&projects), &model, permitting);
        let mut request = request();
        binding.apply(&mut request).unwrap();
        binding.recheck(&request).unwrap();
        assert_eq!(workspace(&request), Some("lax"));
    }

    #[test]
    fn an_unconfigured_project_sends_no_header() {
        for (projects, requires_lax) in [(projects(None, Some("lax")), false), (projects(Some("strict"), None), true)] {
            let model = model(requires_lax);
            let binding = Binding::new(Some(&projects), &model, ComplianceEnvelope::permitting_data_sharing());
            let mut request = request();
            binding.apply(&mut request).unwrap();
            assert_eq!(workspace(&request), None);
        }
        let ordinary = model(false);
        let unbound = Binding::new(None, &ordinary, Default::default());
        let mut request = request();
        unbound.apply(&mut request).unwrap();
        assert!(request.headers.is_empty());
    }

    #[test]
    fn the_last_line_refuses_a_lax_bound_request_under_the_default_envelope() {
        let projects = projects(Some("strict"), Some("lax"));
        let (ordinary, data_sharing) = (model(false), model(true));
        let binding = Binding::new(Some(&projects), &ordinary, ComplianceEnvelope::default());
        let mut request = request();
        request.headers.push(("Anthropic-Workspace-Id".into(), "lax".into()));
        let error = crate::error::WeirError::from(binding.recheck(&request).unwrap_err());
        assert!(error.to_string().contains("about to be sent"), "{error}");
        let lax_model = Binding::new(Some(&projects), &data_sharing, ComplianceEnvelope::default());
        assert!(lax_model.recheck(&self::request()).is_err(), "a requires_lax model never leaves");
    }

    #[test]
    fn a_component_may_not_bind_the_project_itself() {
        let (projects, model) = (projects(Some("strict"), None), model(false));
        let binding = Binding::new(Some(&projects), &model, Default::default());
        let mut request = request();
        request.headers.push(("anthropic-workspace-id".into(), "chosen-by-component".into()));
        let error = crate::error::WeirError::from(binding.apply(&mut request).unwrap_err());
        assert!(error.to_string().contains("only the host binds"), "{error}");
    }
}
