//! `{"$set": [...]}` and `{"$map": [[key, value], ...]}`: JavaScript's `Set` and `Map`.

use std::collections::{BTreeMap, HashMap};
use std::hash::{BuildHasher, Hash};

use serde::de::{self, DeserializeOwned, Deserializer};
use serde::ser::{SerializeSeq, Serializer};
use serde::{Deserialize, Serialize};

/// A set stored as the codec's `$set`: `C` is any collection serde writes as a sequence and
/// reads from one (`BTreeSet`, `HashSet`, `Vec`, ...). Members in the collection's order; the
/// codec refuses a set holding one value twice. Plain data.
///
/// ```
/// use std::collections::BTreeSet;
/// use agent_state::types::Set;
///
/// let tags = Set(BTreeSet::from(["b", "a"]));
/// assert_eq!(serde_json::to_string(&tags).unwrap(), r#"{"$set":["a","b"]}"#);
/// let back: Set<BTreeSet<String>> = serde_json::from_str(r#"{"$set":["x"]}"#).unwrap();
/// assert!(back.0.contains("x"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct Set<C>(pub C);

impl<C: Serialize> Serialize for Set<C> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        super::write_tagged(serializer, "$set", &self.0)
    }
}

impl<'de, C: DeserializeOwned> Deserialize<'de> for Set<C> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let inner = super::read_tagged(deserializer, "$set", "a set")?;
        C::deserialize(inner).map(Set).map_err(de::Error::custom)
    }
}

/// A map stored as the codec's `$map` (`[[key, value], ...]`): keys of any type, numbers and
/// objects included, unlike a JSON object's. `C` is a [`MapEntries`]: `BTreeMap`, `HashMap` or
/// `Vec<(K, V)>` (which keeps the stored order). Plain data.
///
/// ```
/// use std::collections::BTreeMap;
/// use agent_state::types::Map;
///
/// let seen = Map(BTreeMap::from([(2.5f64.to_string(), 1), ("a".to_string(), 2)]));
/// assert_eq!(serde_json::to_string(&seen).unwrap(), r#"{"$map":[["2.5",1],["a",2]]}"#);
/// let pairs: Map<Vec<(u32, String)>> = serde_json::from_str(r#"{"$map":[[1,"one"]]}"#).unwrap();
/// assert_eq!(pairs.0, vec![(1, "one".to_string())]);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct Map<C>(pub C);

/// A collection of key-value pairs a [`Map`] stores: its entries in order, and built from
/// them. Implemented for `BTreeMap`, `HashMap` and `Vec<(K, V)>`.
pub trait MapEntries {
    /// The keys' type.
    type Key;
    /// The values' type.
    type Value;
    /// The entries, in the order they are stored.
    fn entries(&self) -> impl Iterator<Item = (&Self::Key, &Self::Value)>;
    /// The collection of these entries (read in the stored order).
    fn from_entries(entries: Vec<(Self::Key, Self::Value)>) -> Self;
}

/// The standard maps: their iteration order, built by collecting.
macro_rules! standard_map {
    ($map:ty, $($bound:tt)*) => {
        impl<$($bound)*> MapEntries for $map {
            type Key = K;
            type Value = V;
            fn entries(&self) -> impl Iterator<Item = (&K, &V)> {
                self.iter()
            }
            fn from_entries(entries: Vec<(K, V)>) -> Self {
                entries.into_iter().collect()
            }
        }
    };
}

standard_map!(BTreeMap<K, V>, K: Ord, V);
standard_map!(HashMap<K, V, H>, K: Eq + Hash, V, H: BuildHasher + Default);

impl<K, V> MapEntries for Vec<(K, V)> {
    type Key = K;
    type Value = V;
    fn entries(&self) -> impl Iterator<Item = (&K, &V)> {
        self.iter().map(|(k, v)| (k, v))
    }
    fn from_entries(entries: Vec<(K, V)>) -> Self {
        entries
    }
}

impl<C> Serialize for Map<C>
where
    C: MapEntries,
    C::Key: Serialize,
    C::Value: Serialize,
{
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        struct Pairs<'a, C>(&'a C);
        impl<C> Serialize for Pairs<'_, C>
        where
            C: MapEntries,
            C::Key: Serialize,
            C::Value: Serialize,
        {
            fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                let mut seq = serializer.serialize_seq(None)?;
                for pair in self.0.entries() {
                    seq.serialize_element(&pair)?;
                }
                seq.end()
            }
        }
        super::write_tagged(serializer, "$map", &Pairs(&self.0))
    }
}

impl<'de, C> Deserialize<'de> for Map<C>
where
    C: MapEntries,
    C::Key: DeserializeOwned,
    C::Value: DeserializeOwned,
{
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let inner = super::read_tagged(deserializer, "$map", "a map")?;
        let pairs = Vec::<(C::Key, C::Value)>::deserialize(inner).map_err(de::Error::custom)?;
        Ok(Map(C::from_entries(pairs)))
    }
}
