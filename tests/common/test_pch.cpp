// The translation unit that builds the tests' shared precompiled header (tests/CMakeLists.txt: strata_test_pch);
// the header list is there. This program is never run.
int main() { return 0; }
