//! Opening the object store a URL names: object_store's own for `file://` and
//! `memory://`, the cloud builders (with their environment settings) for `s3://`, `gs://`
//! and `az://`, retrying only within the store timeout.

use std::sync::Arc;
use std::time::Duration;

use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreScheme, RetryConfig};

/// A cloud store's builder from the URL and options, retrying within `retry`.
macro_rules! cloud {
    ($builder:ty, $url:expr, $options:expr, $retry:expr) => {{
        let builder =
            $options.fold(<$builder>::new().with_url($url.to_string()), |builder, (key, value)| match key.parse() {
                Ok(k) => builder.with_config(k, value),
                Err(_) => builder,
            });
        Arc::new(builder.with_retry($retry).build()?) as Arc<dyn ObjectStore>
    }};
}

/// The store behind `url`: object_store's own, except that retries stop within
/// `timeout` (its default retries for three minutes, far past any request's patience).
pub(super) fn open_backend(
    url: &url::Url,
    timeout: Duration,
) -> Result<(Arc<dyn ObjectStore>, Path), object_store::Error> {
    let (scheme, path) = ObjectStoreScheme::parse(url)?;
    // Each cloud builder reads its own settings (AWS_*, GOOGLE_*, AZURE_*), e.g.
    // AWS_ENDPOINT and AWS_ALLOW_HTTP for an S3-compatible server.
    let options = std::env::vars().filter_map(|(k, v)| {
        let k = k.to_ascii_lowercase();
        (k.starts_with("aws_") || k.starts_with("google_") || k.starts_with("azure_")).then_some((k, v))
    });
    let retry = RetryConfig { max_retries: 3, retry_timeout: timeout, ..RetryConfig::default() };
    let inner = match scheme {
        ObjectStoreScheme::AmazonS3 => cloud!(object_store::aws::AmazonS3Builder, url, options, retry),
        ObjectStoreScheme::GoogleCloudStorage => {
            cloud!(object_store::gcp::GoogleCloudStorageBuilder, url, options, retry)
        }
        ObjectStoreScheme::MicrosoftAzure => cloud!(object_store::azure::MicrosoftAzureBuilder, url, options, retry),
        _ => return object_store::parse_url(url).map(|(store, root)| (Arc::from(store), root)),
    };
    Ok((inner, Path::parse(path)?))
}
