//! Bytes: `{"$arraybuffer": "<base64>"}` (JavaScript's `ArrayBuffer`, Python's `bytes`, Go's
//! `[]byte`) and `{"$typedarray": {"type": ..., "base64": ...}}` (typed arrays and `DataView`:
//! their bytes, little-endian, with the array's type).

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use serde::de::{self, Deserialize, Deserializer};
use serde::ser::{Serialize, SerializeMap, Serializer};
use serde_json::Value;

/// Bytes stored as the codec's `$arraybuffer`. `T` is what holds them: `Vec<u8>` (the
/// default), `bytes::Bytes`, or any type that is `AsRef<[u8]>` and `From<Vec<u8>>`. Plain data.
///
/// (A bare `Vec<u8>` is written by serde as an array of numbers, which reads back as such in
/// every language; this type, or [`bytes`](mod@bytes) on the field, stores bytes as bytes.)
///
/// ```
/// use agent_state::types::Bytes;
///
/// let text = serde_json::to_string(&Bytes(vec![0u8, 1, 2, 127, 128, 255])).unwrap();
/// assert_eq!(text, r#"{"$arraybuffer":"AAECf4D/"}"#);
/// let back: Bytes = serde_json::from_str(&text).unwrap();
/// assert_eq!(back.0, [0, 1, 2, 127, 128, 255]);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Bytes<T = Vec<u8>>(pub T);

impl<T: AsRef<[u8]>> Serialize for Bytes<T> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        bytes::serialize(&self.0, serializer)
    }
}

impl<'de, T: From<Vec<u8>>> Deserialize<'de> for Bytes<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        bytes::deserialize::<D, Vec<u8>>(deserializer).map(|b| Bytes(T::from(b)))
    }
}

/// A field of bytes (`Vec<u8>`, `bytes::Bytes`, ...) as an `$arraybuffer`:
/// `#[serde(with = "agent_state::types::bytes")]`.
pub mod bytes {
    use super::*;

    /// Writes the bytes as an `$arraybuffer`.
    pub fn serialize<S: Serializer, T: AsRef<[u8]> + ?Sized>(
        bytes: &T,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        crate::types::write_tagged(serializer, "$arraybuffer", &STANDARD.encode(bytes))
    }

    /// Reads an `$arraybuffer`.
    pub fn deserialize<'de, D: Deserializer<'de>, T: From<Vec<u8>>>(
        deserializer: D,
    ) -> Result<T, D::Error> {
        let inner = crate::types::read_tagged(deserializer, "$arraybuffer", "bytes")?;
        match &inner {
            Value::String(text) => decode(text).map(T::from),
            _ => Err(de::Error::custom("$arraybuffer must be a base64 string")),
        }
    }
}

fn decode<E: de::Error>(text: &str) -> Result<Vec<u8>, E> {
    STANDARD
        .decode(text)
        .map_err(|e| E::custom(format_args!("invalid base64 ({e})")))
}

/// A JavaScript typed array or `DataView`, stored as the codec's `$typedarray`: the array's
/// type name (`"Float32Array"`, `"Uint8Array"`, `"DataView"`, ...) and its bytes,
/// little-endian. [`TypedArray::of`] and [`TypedArray::elements`] convert from and to Rust
/// numbers. Plain data.
///
/// ```
/// use agent_state::types::TypedArray;
///
/// let samples = TypedArray::of(&[0.5f32, -1.0]);
/// assert_eq!(
///     serde_json::to_string(&samples).unwrap(),
///     r#"{"$typedarray":{"type":"Float32Array","base64":"AAAAPwAAgL8="}}"#
/// );
/// assert_eq!(samples.elements::<f32>(), Some(vec![0.5, -1.0]));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TypedArray {
    /// The JavaScript type's name (the codec's list: `Int8Array` ... `BigUint64Array`,
    /// `DataView`).
    pub kind: String,
    /// The elements' bytes, little-endian.
    pub bytes: Vec<u8>,
}

/// A number type with a JavaScript typed array of its own.
pub trait Element: Copy + sealed::Sealed {
    /// The typed array's name.
    const KIND: &'static str;
    /// Bytes per element.
    const SIZE: usize;
    /// Appends the element's little-endian bytes.
    fn put(self, out: &mut Vec<u8>);
    /// The element of `SIZE` little-endian bytes.
    fn take(bytes: &[u8]) -> Self;
}

mod sealed {
    pub trait Sealed {}
}

macro_rules! elements {
    ($($t:ty => $kind:literal),* $(,)?) => {$(
        impl sealed::Sealed for $t {}
        impl Element for $t {
            const KIND: &'static str = $kind;
            const SIZE: usize = std::mem::size_of::<$t>();
            fn put(self, out: &mut Vec<u8>) {
                out.extend_from_slice(&self.to_le_bytes());
            }
            fn take(bytes: &[u8]) -> Self {
                let mut a = [0u8; std::mem::size_of::<$t>()];
                a.copy_from_slice(bytes);
                <$t>::from_le_bytes(a)
            }
        }
    )*};
}

elements! {
    i8 => "Int8Array", u8 => "Uint8Array", i16 => "Int16Array", u16 => "Uint16Array",
    i32 => "Int32Array", u32 => "Uint32Array", f32 => "Float32Array", f64 => "Float64Array",
    i64 => "BigInt64Array", u64 => "BigUint64Array",
}

impl TypedArray {
    /// A typed array of another type, or a `DataView` (`kind` `"DataView"`), from its bytes.
    pub fn new(kind: impl Into<String>, bytes: impl Into<Vec<u8>>) -> TypedArray {
        TypedArray {
            kind: kind.into(),
            bytes: bytes.into(),
        }
    }

    /// The typed array of these numbers (`&[f32]` is a `Float32Array`, `&[u64]` a
    /// `BigUint64Array`...).
    pub fn of<E: Element>(elements: &[E]) -> TypedArray {
        let mut bytes = Vec::with_capacity(elements.len() * E::SIZE);
        for e in elements {
            e.put(&mut bytes);
        }
        TypedArray::new(E::KIND, bytes)
    }

    /// The elements, when the array is of `E`'s type (`None` otherwise).
    pub fn elements<E: Element>(&self) -> Option<Vec<E>> {
        if self.kind != E::KIND || !self.bytes.len().is_multiple_of(E::SIZE) {
            return None;
        }
        Some(self.bytes.chunks_exact(E::SIZE).map(E::take).collect())
    }
}

impl Serialize for TypedArray {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        struct Inner<'a>(&'a TypedArray);
        impl Serialize for Inner<'_> {
            fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                let mut map = serializer.serialize_map(Some(2))?;
                map.serialize_entry("type", &self.0.kind)?;
                map.serialize_entry("base64", &STANDARD.encode(&self.0.bytes))?;
                map.end()
            }
        }
        crate::types::write_tagged(serializer, "$typedarray", &Inner(self))
    }
}

impl<'de> Deserialize<'de> for TypedArray {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let inner = crate::types::read_tagged(deserializer, "$typedarray", "a typed array")?;
        match (inner.get("type"), inner.get("base64")) {
            (Some(Value::String(kind)), Some(Value::String(data))) => Ok(TypedArray {
                kind: kind.clone(),
                bytes: decode(data)?,
            }),
            _ => Err(de::Error::custom(
                "$typedarray must be {\"type\": <name>, \"base64\": <string>}",
            )),
        }
    }
}
