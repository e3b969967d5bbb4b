// The translation unit that sluice_test_pch compiles its precompiled header with (tests/CMakeLists.txt);
// nothing links it.
