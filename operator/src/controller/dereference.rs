//! What the builders need from outside the spec, read from the cluster before anything is
//! built.

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::Secret;
use kube::api::Api;
use kube::Client;

use super::Error;
use crate::builders::{self, Observed};
use crate::status::Problem;
use crate::validate::ValidTenant;

/// Reads the token Secret: its hash rolls the pods on rotation; its absence is a problem the
/// status reports (the pods would wait for the volume forever, silently). While it is missing
/// the pod template keeps the hash it had, so that deleting a Secret by mistake does not roll
/// every pod into a state where none can start.
pub(super) async fn observe_tokens(
    v: &ValidTenant,
    client: &Client,
) -> Result<(Observed, Option<Problem>), Error> {
    let Some(auth) = &v.spec.auth else {
        return Ok((Observed::default(), None));
    };
    let r = &auth.token_secret_ref;
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &v.namespace);
    let problem = match secrets.get_opt(&r.name).await? {
        Some(s) => match s.data.as_ref().and_then(|d| d.get(&r.key)) {
            Some(bytes) => {
                let observed = Observed {
                    tokens_hash: Some(builders::tokens_hash(&bytes.0)),
                };
                return Ok((observed, None));
            }
            None => format!(
                "Secret {:?} has no key {:?} (spec.auth.tokenSecretRef)",
                r.name, r.key
            ),
        },
        None => format!("Secret {:?} not found (spec.auth.tokenSecretRef)", r.name),
    };
    let stss: Api<StatefulSet> = Api::namespaced(client.clone(), &v.namespace);
    let previous = stss.get_opt(&v.name).await?.and_then(|s| {
        s.spec?
            .template
            .metadata?
            .annotations?
            .remove(builders::TOKENS_HASH_ANNOTATION)
    });
    Ok((
        Observed {
            tokens_hash: previous,
        },
        Some(Problem::TokenSecretMissing(problem)),
    ))
}
