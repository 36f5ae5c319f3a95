//! The kernel ledger's measures of a thread or process over a window, in the
//! units they were taken in (ns, counts, bytes).
//!
//! Every type here is generated from the one counter list beside the kernel
//! layout, `ttp_common::for_each_ledger_counter!`: a counter added there
//! appears in [`LedgerMeasures`] (the attach JSON's `kernel`), in
//! [`LedgerColumns`] (the flat, optional form the TTPv2 JSON, its CSV import
//! and the load ledger rows use), with its arithmetic and serde. Added
//! fields are `#[serde(default)]`, so files written before them still load.
use std::ops::AddAssign;

use serde::{Deserialize, Serialize};
use ttp_common::ThreadAccount;

/// A counter written as null (a measure not taken, e.g. `wake_latency_ns`
/// without the wake-up hook) reads back as 0; reports that show it know
/// from their document that it was not taken.
fn null_as_zero<'de, D: serde::Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    Ok(Option::<u64>::deserialize(d)?.unwrap_or(0))
}

macro_rules! declare_measures {
    (
        thread { $( $(#[$tm:meta])* $t:ident, )* }
        io { $( $(#[$im:meta])* $i:ident, )* }
    ) => {
        /// Block I/O of a thread or process.
        #[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
        pub struct IoMeasures {
            $( $(#[$im])* #[serde(default)] pub $i: u64, )*
        }

        /// The ledger's counters of a thread or process.
        #[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
        pub struct LedgerMeasures {
            $(
                $(#[$tm])*
                #[serde(default, deserialize_with = "null_as_zero")]
                pub $t: u64,
            )*
            #[serde(default)]
            pub io: IoMeasures,
        }

        impl LedgerMeasures {
            /// The counters of one kernel account.
            pub fn of(a: &ThreadAccount) -> Self {
                Self {
                    $( $t: a.$t, )*
                    io: IoMeasures { $( $i: a.io.$i, )* },
                }
            }

            /// `self − earlier`, field by field; a counter that went
            /// backwards (which the ledger never does for one thread) counts
            /// as 0, not as a wrap.
            pub fn since(&self, earlier: &Self) -> Self {
                Self {
                    $( $t: self.$t.saturating_sub(earlier.$t), )*
                    io: IoMeasures {
                        $( $i: self.io.$i.saturating_sub(earlier.io.$i), )*
                    },
                }
            }
        }

        impl LedgerMeasures {
            /// Every counter with its name, for the columns of a table:
            /// times first, then block I/O, then counts, each in layout
            /// order (I/O counters by their own names).
            pub fn named(&self) -> Vec<(&'static str, u64)> {
                let mut all = vec![
                    $( (0, stringify!($t), self.$t), )*
                    $( (1, stringify!($i), self.io.$i), )*
                ];
                for c in &mut all {
                    if c.0 == 0 && !c.1.ends_with("_ns") {
                        c.0 = 2;
                    }
                }
                all.sort_by_key(|c| c.0);
                all.into_iter().map(|(_, n, v)| (n, v)).collect()
            }
        }

        impl AddAssign for LedgerMeasures {
            fn add_assign(&mut self, o: Self) {
                // Saturating: a damaged saved file must not overflow a sum.
                $( self.$t = self.$t.saturating_add(o.$t); )*
                $( self.io.$i = self.io.$i.saturating_add(o.io.$i); )*
            }
        }

        /// The ledger's counters flat (I/O counters beside the others) and
        /// each optional: a measure not known is `None` and not written.
        #[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
        pub struct LedgerColumns {
            $(
                $(#[$tm])*
                #[serde(default, skip_serializing_if = "Option::is_none")]
                pub $t: Option<u64>,
            )*
            $(
                $(#[$im])*
                #[serde(default, skip_serializing_if = "Option::is_none")]
                pub $i: Option<u64>,
            )*
        }

        impl LedgerColumns {
            /// Column names, in layout order.
            pub const NAMES: &[&str] = &[ $( stringify!($t), )* $( stringify!($i), )* ];

            /// The slot of the column `name`, if it is one.
            pub fn slot(&mut self, name: &str) -> Option<&mut Option<u64>> {
                match name {
                    $( stringify!($t) => Some(&mut self.$t), )*
                    $( stringify!($i) => Some(&mut self.$i), )*
                    _ => None,
                }
            }

            /// Every column known and zero.
            pub fn zero() -> Self {
                Self { $( $t: Some(0), )* $( $i: Some(0), )* }
            }

            /// Field-wise sum; a column is known in the sum only when it is
            /// known in both.
            pub fn plus(&self, o: &Self) -> Self {
                let add = |a: Option<u64>, b: Option<u64>| Some(a?.saturating_add(b?));
                Self {
                    $( $t: add(self.$t, o.$t), )*
                    $( $i: add(self.$i, o.$i), )*
                }
            }
        }

        impl From<&LedgerMeasures> for LedgerColumns {
            fn from(m: &LedgerMeasures) -> Self {
                Self { $( $t: Some(m.$t), )* $( $i: Some(m.io.$i), )* }
            }
        }
    };
}

ttp_common::for_each_ledger_counter!(declare_measures);
