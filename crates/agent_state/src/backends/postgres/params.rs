//! A statement's parameters as the connection sends them: each value with its type.

use tokio_postgres::types::{ToSql, Type};

/// A statement's parameter and its type (statements are unnamed: the server is told each
/// parameter's type rather than asked for it).
pub(super) type Param<'a> = (&'a (dyn ToSql + Sync), Type);

/// The values of `params` (a prepared statement knows their types).
pub(super) fn values<'a>(params: &[Param<'a>]) -> Vec<&'a (dyn ToSql + Sync)> {
    params.iter().map(|(v, _)| *v).collect()
}

/// A `text` parameter.
pub(super) fn text_param(v: &(dyn ToSql + Sync)) -> Param<'_> {
    (v, Type::TEXT)
}

/// A `bigint` parameter.
pub(super) fn int8_param(v: &(dyn ToSql + Sync)) -> Param<'_> {
    (v, Type::INT8)
}

/// An `integer` parameter.
pub(super) fn int4_param(v: &(dyn ToSql + Sync)) -> Param<'_> {
    (v, Type::INT4)
}

/// A `boolean` parameter.
pub(super) fn bool_param(v: &(dyn ToSql + Sync)) -> Param<'_> {
    (v, Type::BOOL)
}
