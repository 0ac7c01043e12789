package docs

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	_ "google.golang.org/grpc/health/grpc_health_v1" // its descriptors, for grpc.health.v1.Health/Check
	"google.golang.org/grpc/metadata"
	reflectpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/dynamicpb"

	_ "github.com/jq-dev/jq/api/gen/jq/v1"        // the descriptors the stand-in resolves methods with
	_ "github.com/jq-dev/jq/api/gen/taskqueue/v1" // …
)

// grpcurlEnv makes this test binary act as grpcurl (see grpcurlMain) instead of running tests.
const grpcurlEnv = "JQ_TEST_AS_GRPCURL"

// grpcurlMain is a stand-in for grpcurl (github.com/fullstorydev/grpcurl) where none is installed,
// for the documentation test's shell blocks: the part of its command line the docs use, with its
// output and exit codes. `grpcurl -plaintext [-d JSON] [-H 'k: v'] ADDR list` lists the services by
// reflection; `… ADDR pkg.Service/Method` makes a unary call with -d parsed by the protobuf JSON
// mapping against the method's descriptor (an unknown field or method fails, as with grpcurl) and
// prints the answer as grpcurl does (multi-line JSON, lowerCamelCase names); an RPC error is
// "ERROR:" with its code and message on stderr and exit 64 + code.
func grpcurlMain(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("grpcurl", flag.ContinueOnError)
	fs.SetOutput(stderr)
	plaintext := fs.Bool("plaintext", false, "")
	data := fs.String("d", "", "")
	var headers []string
	fs.Func("H", "", func(s string) error { headers = append(headers, s); return nil })
	fs.String("import-path", "", "")
	fs.String("proto", "", "")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if !*plaintext || fs.NArg() < 1 || fs.NArg() > 2 {
		fmt.Fprintln(stderr, "grpcurl stand-in: only -plaintext ADDR list|Service/Method is supported")
		return 2
	}
	cc, err := grpc.NewClient(fs.Arg(0), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		fmt.Fprintln(stderr, "Failed to dial target host:", err)
		return 1
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	hdr := metadata.MD{}
	for _, h := range headers {
		k, v, _ := strings.Cut(h, ":")
		hdr.Append(strings.TrimSpace(k), strings.TrimSpace(v))
	}
	ctx = metadata.NewOutgoingContext(ctx, hdr)
	what := "list"
	if fs.NArg() == 2 {
		what = fs.Arg(1)
	}
	if what == "list" {
		return grpcurlList(ctx, cc, stdout, stderr)
	}
	i := strings.LastIndexAny(what, "/.") // grpcurl takes Service/Method and Service.Method
	if i < 0 {
		fmt.Fprintf(stderr, "Failed to resolve symbol %q\n", what)
		return 1
	}
	svc, method := what[:i], what[i+1:]
	d, err := protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName(svc))
	sd, isSvc := d.(protoreflect.ServiceDescriptor)
	if err != nil || !isSvc || sd.Methods().ByName(protoreflect.Name(method)) == nil {
		fmt.Fprintf(stderr, "Error invoking method %q: target server does not expose service %q\n", what, svc)
		return 1
	}
	md := sd.Methods().ByName(protoreflect.Name(method))
	req, resp := dynamicpb.NewMessage(md.Input()), dynamicpb.NewMessage(md.Output())
	if *data != "" {
		if err := protojson.Unmarshal([]byte(*data), req); err != nil {
			fmt.Fprintln(stderr, "Error invoking method", what+":", "error getting request data:", err)
			return 1
		}
	}
	if err := cc.Invoke(ctx, "/"+svc+"/"+method, req, resp); err != nil {
		st, _ := status.FromError(err)
		fmt.Fprintf(stderr, "ERROR:\n  Code: %s\n  Message: %s\n", st.Code(), st.Message())
		return 64 + int(st.Code())
	}
	out, err := protojson.Marshal(resp)
	var compact, indented bytes.Buffer
	if err == nil {
		err = json.Compact(&compact, out) // protojson spaces at random; grpcurl's output does not
	}
	if err == nil {
		err = json.Indent(&indented, compact.Bytes(), "", "  ")
	}
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	fmt.Fprintln(stdout, indented.String())
	return 0
}

func grpcurlList(ctx context.Context, cc *grpc.ClientConn, stdout, stderr io.Writer) int {
	stream, err := reflectpb.NewServerReflectionClient(cc).ServerReflectionInfo(ctx)
	if err == nil {
		err = stream.Send(&reflectpb.ServerReflectionRequest{MessageRequest: &reflectpb.ServerReflectionRequest_ListServices{}})
	}
	var resp *reflectpb.ServerReflectionResponse
	if err == nil {
		resp, err = stream.Recv()
	}
	if err != nil {
		fmt.Fprintln(stderr, "Failed to list services:", err)
		return 1
	}
	var names []string
	for _, s := range resp.GetListServicesResponse().GetService() {
		names = append(names, s.GetName())
	}
	slices.Sort(names)
	for _, n := range names {
		fmt.Fprintln(stdout, n)
	}
	if err := stream.CloseSend(); err != nil && !errors.Is(err, io.EOF) {
		return 1
	}
	return 0
}
