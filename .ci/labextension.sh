# Sourced by .ci/run: the JupyterLab extension committed under src/nbchat/labextension/
# must be what its sources in labextension/ build to. Users never build it (the wheel
# carries it prebuilt); this rebuilds it in a temporary copy and compares.

check_labextension() {
    local tmp
    tmp=$(mktemp -d)
    mkdir -p "$tmp/labextension" "$tmp/src/nbchat"
    # The sources only: package.json's outputDir (../src/nbchat/labextension) lands in $tmp.
    tar -C labextension --exclude=node_modules --exclude=lib --exclude=tsconfig.tsbuildinfo \
        -cf - . | tar -C "$tmp/labextension" -xf -
    (
        cd "$tmp/labextension"
        npm ci --silent --no-audit --no-fund
        npx tsc
        jupyter labextension build . >build.log 2>&1 || { cat build.log; exit 1; }
    )
    if ! diff -r "$tmp/src/nbchat/labextension" src/nbchat/labextension; then
        echo "The committed JupyterLab extension in src/nbchat/labextension/ is not what" >&2
        echo "labextension/ builds to. Rebuild it and commit the result:" >&2
        echo "    cd labextension && npm ci && npx tsc && jupyter labextension build ." >&2
        rm -rf "$tmp"
        return 1
    fi
    rm -rf "$tmp"
}
