//! The API's own description: the OpenAPI document, and a reference page rendered
//! from it by Swagger UI, whose assets the page build copies into `dist/api-docs/`
//! (npm `swagger-ui-dist`), so nothing is loaded from another origin.

use axum::response::Html;
use axum::routing::get;
use axum::{Json, Router};

const PAGE: &str = r##"<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>stacklens API reference</title>
<link rel="stylesheet" href="/api-docs/swagger-ui.css">
</head>
<body>
<div id="api-reference"></div>
<script src="/api-docs/swagger-ui-bundle.js"></script>
<script>
window.ui = SwaggerUIBundle({ url: "/api/openapi.json", dom_id: "#api-reference", deepLinking: true });
</script>
</body>
</html>
"##;

pub fn routes(router: Router, doc: utoipa::openapi::OpenApi) -> Router {
    router
        .route("/api/openapi.json", get(move || async move { Json(doc) }))
        .route("/api/docs", get(|| async { Html(PAGE) }))
}
