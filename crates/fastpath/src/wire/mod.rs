//! Wire formats. STUB
