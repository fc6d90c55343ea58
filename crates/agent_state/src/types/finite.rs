//! Floats that are not finite, refused before a value is written: serde_json writes NaN and
//! the infinities as `null` (JSON has no form for them), which would store, or with
//! [`Agent::set`](crate::Agent::set) skip, a value the program never meant. The other
//! languages' bindings refuse them; so does the typed API, with [`Error::Codec`].
//!
//! A serializer that writes nothing and looks at every number on the way.

use std::fmt::Display;

use serde::ser::{self, Serialize};

use crate::error::{Error, Result};

/// `Ok` unless `value` holds a float that is not finite (`what` names the value in the message).
pub(crate) fn check<T: Serialize + ?Sized>(what: &str, value: &T) -> Result<()> {
    match value.serialize(Finite) {
        Err(Found::NotFinite(x)) => Err(Error::Codec(format!(
            "{what} holds the number {x}, which JSON cannot hold (NaN and the infinities have no \
             JSON form)"
        ))),
        // serde's own failures are reported by the serialization that follows, with its words.
        Ok(()) | Err(Found::Serde) => Ok(()),
    }
}

#[derive(Debug)]
enum Found {
    NotFinite(f64),
    Serde,
}

impl Display for Found {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a number that is not finite")
    }
}

impl std::error::Error for Found {}

impl ser::Error for Found {
    fn custom<T: Display>(_: T) -> Found {
        Found::Serde
    }
}

struct Finite;

type R = std::result::Result<(), Found>;

fn float(x: f64) -> R {
    if x.is_finite() {
        Ok(())
    } else {
        Err(Found::NotFinite(x))
    }
}

/// Methods of values with nothing inside to look at.
macro_rules! leaves {
    ($($method:ident($($arg:ty),*);)*) => {$(
        fn $method(self, $(_: $arg),*) -> R {
            Ok(())
        }
    )*};
}

/// Methods that start a compound value (its parts come through the compound forms below).
macro_rules! compounds {
    ($($method:ident($($arg:ty),*);)*) => {$(
        fn $method(self, $(_: $arg),*) -> std::result::Result<Finite, Found> {
            Ok(Finite)
        }
    )*};
}

impl ser::Serializer for Finite {
    type Ok = ();
    type Error = Found;
    type SerializeSeq = Finite;
    type SerializeTuple = Finite;
    type SerializeTupleStruct = Finite;
    type SerializeTupleVariant = Finite;
    type SerializeMap = Finite;
    type SerializeStruct = Finite;
    type SerializeStructVariant = Finite;

    fn serialize_f32(self, v: f32) -> R {
        float(f64::from(v))
    }
    fn serialize_f64(self, v: f64) -> R {
        float(v)
    }
    leaves! {
        serialize_bool(bool); serialize_i8(i8); serialize_i16(i16); serialize_i32(i32);
        serialize_i64(i64); serialize_i128(i128); serialize_u8(u8); serialize_u16(u16);
        serialize_u32(u32); serialize_u64(u64); serialize_u128(u128); serialize_char(char);
        serialize_str(&str); serialize_bytes(&[u8]); serialize_none(); serialize_unit();
        serialize_unit_struct(&'static str);
        serialize_unit_variant(&'static str, u32, &'static str);
    }
    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> R {
        value.serialize(Finite)
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(self, _: &'static str, value: &T) -> R {
        value.serialize(Finite)
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        value: &T,
    ) -> R {
        value.serialize(Finite)
    }
    compounds! {
        serialize_seq(Option<usize>); serialize_tuple(usize);
        serialize_tuple_struct(&'static str, usize);
        serialize_tuple_variant(&'static str, u32, &'static str, usize);
        serialize_map(Option<usize>); serialize_struct(&'static str, usize);
        serialize_struct_variant(&'static str, u32, &'static str, usize);
    }
}

/// The compound forms: each element, key and value is looked at.
macro_rules! compound {
    ($($trait:ident :: $method:ident ($($name:ident),*);)*) => {$(
        impl ser::$trait for Finite {
            type Ok = ();
            type Error = Found;
            fn $method<T: Serialize + ?Sized>(&mut self, $($name: &'static str,)* value: &T) -> R {
                value.serialize(Finite)
            }
            fn end(self) -> R {
                Ok(())
            }
        }
    )*};
}

compound! {
    SerializeSeq::serialize_element();
    SerializeTuple::serialize_element();
    SerializeTupleStruct::serialize_field();
    SerializeTupleVariant::serialize_field();
    SerializeStruct::serialize_field(_key);
    SerializeStructVariant::serialize_field(_key);
}

impl ser::SerializeMap for Finite {
    type Ok = ();
    type Error = Found;
    fn serialize_key<T: Serialize + ?Sized>(&mut self, key: &T) -> R {
        key.serialize(Finite)
    }
    fn serialize_value<T: Serialize + ?Sized>(&mut self, value: &T) -> R {
        value.serialize(Finite)
    }
    fn end(self) -> R {
        Ok(())
    }
}
