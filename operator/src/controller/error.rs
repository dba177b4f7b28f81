//! The reconcile's one error type: its variants, not strings, decide the metric label and
//! when to retry.

use std::time::Duration;

use crate::validate::SpecError;

/// Why a reconcile failed. The variant names are the `error` label of
/// `sluice_operator_reconcile_errors_total`.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("invalid spec: {0}")]
    InvalidSpec(#[from] SpecError),
    #[error("applying {kind} {name}: {source}")]
    Apply {
        kind: &'static str,
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    #[error("the tenant has no namespace")]
    NoNamespace,
    #[error("reading random bytes for the tenant's cluster token: {0}")]
    Random(#[source] std::io::Error),
    #[error("{0}")]
    Finalizer(#[source] Box<kube::runtime::finalizer::Error<Error>>),
}

fn kube_label(e: &kube::Error) -> &'static str {
    match e {
        kube::Error::Api(s) => match s.code {
            409 => "Conflict",
            404 => "NotFound",
            403 => "Forbidden",
            422 => "Invalid",
            429 => "TooManyRequests",
            500..=599 => "ServerError",
            _ => "ApiError",
        },
        _ => "Transport",
    }
}

impl Error {
    /// A bounded label for metrics: the error kind, with API errors split by status.
    pub fn metric_label(&self) -> &'static str {
        use kube::runtime::finalizer::Error as F;
        match self {
            Error::InvalidSpec(_) => "InvalidSpec",
            Error::Apply { source, .. } => match kube_label(source) {
                "Invalid" => "ApplyInvalid",
                "Conflict" => "Conflict",
                _ => "ApplyFailed",
            },
            Error::Kube(e) => kube_label(e),
            Error::NoNamespace => "NoNamespace",
            Error::Random(_) => "Random",
            Error::Finalizer(f) => match f.as_ref() {
                F::ApplyFailed(e) | F::CleanupFailed(e) => e.metric_label(),
                F::AddFinalizer(_) => "AddFinalizer",
                F::RemoveFinalizer(_) => "RemoveFinalizer",
                F::UnnamedObject => "UnnamedObject",
                F::InvalidFinalizer => "InvalidFinalizer",
            },
        }
    }

    /// Conflicts are someone else's concurrent write: retry almost at once. An invalid spec
    /// waits for the user (the watch brings the fix). Anything else backs off.
    pub fn requeue_after(&self) -> Duration {
        match self.metric_label() {
            "Conflict" => Duration::from_secs(1),
            "InvalidSpec" => Duration::from_secs(300),
            _ => Duration::from_secs(15),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::core::ErrorResponse;

    fn api_err(code: u16) -> kube::Error {
        kube::Error::Api(ErrorResponse {
            status: "Failure".into(),
            message: "m".into(),
            reason: "r".into(),
            code,
        })
    }

    #[test]
    fn error_labels_are_bounded_kinds() {
        assert_eq!(Error::Kube(api_err(409)).metric_label(), "Conflict");
        assert_eq!(Error::Kube(api_err(503)).metric_label(), "ServerError");
        let apply = Error::Apply {
            kind: "StatefulSet",
            name: "x".into(),
            source: api_err(422),
        };
        assert_eq!(apply.metric_label(), "ApplyInvalid");
        let wrapped = Error::Finalizer(Box::new(kube::runtime::finalizer::Error::ApplyFailed(
            Error::InvalidSpec(SpecError::EmptyImage),
        )));
        assert_eq!(wrapped.metric_label(), "InvalidSpec");
        assert_eq!(wrapped.requeue_after(), Duration::from_secs(300));
        let conflict = Error::Finalizer(Box::new(kube::runtime::finalizer::Error::ApplyFailed(
            Error::Apply {
                kind: "ConfigMap",
                name: "x".into(),
                source: api_err(409),
            },
        )));
        assert_eq!(conflict.requeue_after(), Duration::from_secs(1));
        assert_eq!(
            Error::Kube(api_err(500)).requeue_after(),
            Duration::from_secs(15)
        );
    }
}
